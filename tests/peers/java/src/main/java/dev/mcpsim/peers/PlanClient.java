package dev.mcpsim.peers;

import io.modelcontextprotocol.client.transport.HttpClientStreamableHttpTransport;
import io.modelcontextprotocol.client.transport.ServerParameters;
import io.modelcontextprotocol.client.transport.StdioClientTransport;
import io.modelcontextprotocol.json.McpJsonDefaults;
import io.modelcontextprotocol.json.TypeRef;
import io.modelcontextprotocol.modern.client.McpTimeoutException;
import io.modelcontextprotocol.modern.client.transport.HttpClientMcpTransport;
import io.modelcontextprotocol.modern.client.transport.StdioMcpClientTransport;
import io.modelcontextprotocol.spec.McpSchema;
import java.net.URI;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * An MCP client built with the Java SDK, driven against {@code mcp-sim serve} and through
 * {@code mcp-sim record}.
 *
 * <p>Usage: {@code PlanClient -stack modern|legacy PLAN (--url URL | -- COMMAND ARGS...)}
 *
 * <p>PLAN is a JSON list of calls made one after the other, each {@code {"steps": N,
 * "step_ms": M, "timeout_ms": T, "progress": true}}: a {@code tools/call} of {@code slow_op}
 * with a timeout of T ms, asking for progress when {@code progress} is true (the default).
 *
 * <ul>
 *   <li>{@code modern}: the {@code io.modelcontextprotocol.modern} client (2026-07-28 only; no
 *       {@code server/discover} of its own, no fallback). The call's {@code roundTimeout} is its
 *       timeout, which progress does not reset; a progress listener makes the SDK add the
 *       token.
 *   <li>{@code legacy}: the {@code McpClient.sync} client (opens with {@code initialize}). Its
 *       only timeout is the client's {@code requestTimeout}, one for every request, so the
 *       first call's T is taken for all; the token is set on the request and progress comes
 *       to the client's one progress consumer.
 * </ul>
 *
 * <p>One JSON line per call goes to stdout: {@code {"call": i, "outcome": "result" | "error"
 * | "timeout", "progress": n, "ms": elapsed}}.
 */
public final class PlanClient {
    private static final AtomicLong PROGRESS = new AtomicLong();

    private PlanClient() {}

    private static int num(Map<String, Object> call, String name) {
        Object v = call.get(name);
        return v instanceof Number n ? n.intValue() : 0;
    }

    private static boolean wantsProgress(Map<String, Object> call) {
        return !Boolean.FALSE.equals(call.get("progress"));
    }

    private static void say(int call, String outcome, long progress, long ms, String error) {
        String text = error == null ? "" : error.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ");
        System.out.println("{\"call\":" + call + ",\"outcome\":\"" + outcome + "\",\"progress\":" + progress
                + ",\"ms\":" + ms + ",\"error\":\"" + text + "\"}");
        System.out.flush();
    }

    private static boolean isTimeout(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof McpTimeoutException || t instanceof TimeoutException) {
                return true;
            }
        }
        return false;
    }

    private interface Session {
        /** Makes call {@code k}; returns whether its result was an error result. */
        boolean call(int k, Map<String, Object> call) throws Exception;

        void close();
    }

    private static ServerParameters command(List<String> command) {
        return ServerParameters.builder(command.get(0))
                .args(command.subList(1, command.size()).toArray(new String[0]))
                .build();
    }

    private static Session modern(String url, List<String> command) {
        var info = io.modelcontextprotocol.modern.McpSchema.Implementation.builder("java-sdk-plan-client", "1.0.0").build();
        final AutoCloseable transport;
        final io.modelcontextprotocol.modern.client.McpSyncClient client;
        if (url != null) {
            var t = HttpClientMcpTransport.builder(url).build();
            transport = null;
            client = io.modelcontextprotocol.modern.client.McpClient.sync(t).clientInfo(info).build();
        } else {
            var t = StdioMcpClientTransport.builder(command(command)).start();
            transport = t;
            client = io.modelcontextprotocol.modern.client.McpClient.sync(t).clientInfo(info).build();
        }
        return new Session() {
            @Override
            public boolean call(int k, Map<String, Object> call) {
                var spec = client.tool("slow_op")
                        .arguments(Map.of("steps", num(call, "steps"), "step_ms", num(call, "step_ms")))
                        .roundTimeout(Duration.ofMillis(num(call, "timeout_ms")));
                if (wantsProgress(call)) {
                    spec = spec.progress(p -> PROGRESS.incrementAndGet());
                }
                var result = spec.call();
                return Boolean.TRUE.equals(result.isError());
            }

            @Override
            public void close() {
                try {
                    if (transport != null) {
                        transport.close();
                    }
                } catch (Exception e) {
                    // the process ends anyway
                }
            }
        };
    }

    private static Session legacy(String url, List<String> command, Duration timeout) {
        io.modelcontextprotocol.spec.McpClientTransport transport;
        if (url != null) {
            URI uri = URI.create(url);
            String base = uri.getScheme() + "://" + uri.getAuthority();
            transport = HttpClientStreamableHttpTransport.builder(base).endpoint(uri.getPath()).build();
        } else {
            transport = new StdioClientTransport(command(command), McpJsonDefaults.getMapper());
        }
        var client = io.modelcontextprotocol.client.McpClient.sync(transport)
                .clientInfo(new McpSchema.Implementation("java-sdk-plan-client", "1.0.0"))
                .requestTimeout(timeout)
                .progressConsumer(p -> PROGRESS.incrementAndGet())
                .build();
        client.initialize();
        return new Session() {
            @Override
            public boolean call(int k, Map<String, Object> call) {
                var request = McpSchema.CallToolRequest.builder("slow_op")
                        .arguments(Map.of("steps", num(call, "steps"), "step_ms", num(call, "step_ms")));
                if (wantsProgress(call)) {
                    request = request.progressToken("java-" + k);
                }
                var result = client.callTool(request.build());
                return Boolean.TRUE.equals(result.isError());
            }

            @Override
            public void close() {
                client.closeGracefully();
            }
        };
    }

    public static void main(String[] argv) throws Exception {
        String stack = null;
        String url = null;
        String plan = null;
        List<String> command = List.of();
        for (int i = 0; i < argv.length; i++) {
            switch (argv[i]) {
                case "-stack" -> stack = argv[++i];
                case "--url", "-url" -> url = argv[++i];
                case "--" -> {
                    command = Arrays.asList(argv).subList(i + 1, argv.length);
                    i = argv.length;
                }
                default -> plan = argv[i];
            }
        }
        if (plan == null || stack == null || (url == null && command.isEmpty())) {
            System.err.println("usage: PlanClient -stack modern|legacy PLAN (--url URL | -- COMMAND ARGS...)");
            System.exit(2);
        }
        List<Map<String, Object>> calls =
                McpJsonDefaults.getMapper().readValue(plan, new TypeRef<List<Map<String, Object>>>() {});
        Duration first = Duration.ofMillis(calls.isEmpty() ? 20_000 : num(calls.get(0), "timeout_ms"));
        Session session = switch (stack) {
            case "modern" -> modern(url, command);
            case "legacy" -> legacy(url, command, first);
            default -> throw new IllegalArgumentException("-stack modern or -stack legacy");
        };
        for (int k = 0; k < calls.size(); k++) {
            long before = PROGRESS.get();
            long started = System.nanoTime();
            String outcome = "result";
            String error = null;
            try {
                if (session.call(k, calls.get(k))) {
                    outcome = "error";
                }
            } catch (Exception e) {
                outcome = isTimeout(e) ? "timeout" : "error";
                error = e.toString();
            }
            say(k, outcome, PROGRESS.get() - before, (System.nanoTime() - started) / 1_000_000, error);
        }
        session.close();
        System.exit(0);
    }
}
