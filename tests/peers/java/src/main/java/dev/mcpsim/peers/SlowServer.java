package dev.mcpsim.peers;

import io.modelcontextprotocol.json.McpJsonDefaults;
import io.modelcontextprotocol.modern.server.McpRequestContext;
import io.modelcontextprotocol.modern.server.McpSyncResponse;
import io.modelcontextprotocol.modern.server.feature.McpSyncTool;
import io.modelcontextprotocol.modern.server.feature.McpSyncToolRepository;
import io.modelcontextprotocol.modern.server.feature.ToolsFeature;
import io.modelcontextprotocol.modern.server.feature.ToolsPage;
import io.modelcontextprotocol.modern.server.transport.HttpServletMcpTransport;
import io.modelcontextprotocol.modern.server.transport.StdioMcpTransport;
import io.modelcontextprotocol.server.McpServer;
import io.modelcontextprotocol.server.McpSyncServerExchange;
import io.modelcontextprotocol.server.transport.HttpServletStreamableServerTransportProvider;
import io.modelcontextprotocol.server.transport.StdioServerTransportProvider;
import io.modelcontextprotocol.spec.McpSchema;
import jakarta.servlet.http.HttpServlet;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;

/**
 * A slow MCP server built with the Java SDK, for {@code mcp-sim probe}.
 *
 * <p>Usage: {@code SlowServer -stack modern|legacy [-http PORT] [-log FILE]}
 *
 * <p>The SDK has two stacks that do not speak each other's era: {@code modern} is the
 * {@code io.modelcontextprotocol.modern} server (2026-07-28 only: {@code server/discover}, no
 * handshake), {@code legacy} the {@code McpServer.sync} server (2025-11-25 and before, with
 * {@code initialize}). Each has one tool, {@code slow_op({steps, step_ms})}: it waits
 * {@code step_ms} ms per step and reports progress 1..steps of steps after each step when the
 * request carried a progress token, as each stack's guide shows (a blocking handler: the
 * modern {@code McpSyncResponse.streaming} with its notifier, the legacy
 * {@code exchange.progressNotification}). An interrupt stops it; whatever else goes on the wire
 * after a cancel is the SDK's doing. Each handler's end is logged ({@code slow_op stopped after
 * K of N steps} or {@code slow_op finished N steps}) to stderr, or appended to FILE with -log: a
 * handler that runs on after its client went away is invisible on the wire.
 *
 * <p>Without -http it serves stdio; with -http it serves Streamable HTTP at /mcp on
 * 127.0.0.1:PORT (an embedded Jetty: the SDK's HTTP transports are servlets) and prints
 * {@code listening on http://127.0.0.1:PORT/mcp} to stderr once it accepts connections.
 */
public final class SlowServer {
    private static PrintStream ends = System.err;

    private SlowServer() {}

    private static void ended(String line) {
        synchronized (SlowServer.class) {
            ends.println(line);
            ends.flush();
        }
    }

    private static int arg(Map<String, Object> args, String name) {
        Object v = args == null ? null : args.get(name);
        return v instanceof Number n ? n.intValue() : 0;
    }

    /** Waits {@code steps} steps, calling {@code progress} after each; returns the steps done. */
    private static String slowOp(int steps, int stepMs, java.util.function.IntConsumer progress) {
        for (int i = 1; i <= steps; i++) {
            try {
                Thread.sleep(stepMs);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                ended("slow_op stopped after " + (i - 1) + " of " + steps + " steps");
                throw new IllegalStateException("cancelled");
            }
            progress.accept(i);
        }
        ended("slow_op finished " + steps + " steps");
        return "done " + steps + " of " + steps + " steps";
    }

    private static final Map<String, Object> SCHEMA = Map.of(
            "type", "object",
            "properties", Map.of(
                    "steps", Map.of("type", "integer"),
                    "step_ms", Map.of("type", "integer")));
    private static final String DESCRIPTION =
            "Wait step_ms ms per step for steps steps, reporting progress after each";

    private static io.modelcontextprotocol.modern.server.McpServer modern() {
        var tool = io.modelcontextprotocol.modern.McpSchema.Tool.builder("slow_op", SCHEMA)
                .description(DESCRIPTION)
                .build();
        McpSyncTool slow = McpSyncTool.of(tool, (ctx, req) -> {
            int steps = arg(req.arguments(), "steps");
            int stepMs = arg(req.arguments(), "step_ms");
            return McpSyncResponse.streaming(notifier -> {
                String text = slowOp(steps, stepMs, i -> notifier.progress(i, (double) steps, null));
                return io.modelcontextprotocol.modern.McpSchema.CallToolResult.builder()
                        .addContent(io.modelcontextprotocol.modern.McpSchema.TextContent.builder(text).build())
                        .build();
            });
        });
        return io.modelcontextprotocol.modern.server.McpServer.builder()
                .serverInfo(io.modelcontextprotocol.modern.McpSchema.Implementation.builder("java-sdk-slow", "1.0.0").build())
                .feature(ToolsFeature.ofSync(new McpSyncToolRepository() {
                    @Override
                    public ToolsPage list(McpRequestContext ctx, String cursor) {
                        return ToolsPage.of(List.of(tool));
                    }

                    @Override
                    public McpSyncTool find(McpRequestContext ctx, String name) {
                        return "slow_op".equals(name) ? slow : null;
                    }
                }))
                .build();
    }

    private static McpSchema.CallToolResult legacyCall(McpSyncServerExchange exchange, McpSchema.CallToolRequest req) {
        int steps = arg(req.arguments(), "steps");
        int stepMs = arg(req.arguments(), "step_ms");
        Object token = req.progressToken();
        String text = slowOp(steps, stepMs, i -> {
            if (token != null) {
                exchange.progressNotification(
                        new McpSchema.ProgressNotification(token, (double) i, (double) steps, null, null));
            }
        });
        return McpSchema.CallToolResult.builder().addTextContent(text).build();
    }

    private static void legacy(McpServer.SyncSpecification<?> spec) {
        var tool = McpSchema.Tool.builder("slow_op", SCHEMA).description(DESCRIPTION).build();
        spec.serverInfo("java-sdk-slow", "1.0.0")
                .capabilities(McpSchema.ServerCapabilities.builder().tools(false).build())
                .toolCall(tool, SlowServer::legacyCall)
                .build();
    }

    private static void serveHttp(HttpServlet servlet, int port) throws Exception {
        Server jetty = new Server(new java.net.InetSocketAddress("127.0.0.1", port));
        ServletContextHandler context = new ServletContextHandler();
        context.setContextPath("/");
        ServletHolder holder = new ServletHolder(servlet);
        holder.setAsyncSupported(true);
        context.addServlet(holder, "/mcp");
        jetty.setHandler(context);
        jetty.start();
        System.err.println("listening on http://127.0.0.1:" + port + "/mcp");
        System.err.flush();
        jetty.join();
    }

    public static void main(String[] argv) throws Exception {
        String stack = null;
        Integer port = null;
        for (int i = 0; i < argv.length; i++) {
            switch (argv[i]) {
                case "-stack" -> stack = argv[++i];
                case "-http" -> port = Integer.parseInt(argv[++i]);
                case "-log" -> ends = new PrintStream(new FileOutputStream(argv[++i], true), true);
                default -> {
                    System.err.println("usage: SlowServer -stack modern|legacy [-http PORT] [-log FILE]");
                    System.exit(2);
                }
            }
        }
        if ("modern".equals(stack)) {
            var server = modern();
            if (port != null) {
                serveHttp(HttpServletMcpTransport.builder(server).endpoint("/mcp").build(), port);
            } else {
                // Returns when stdin ends.
                new StdioMcpTransport(server, McpJsonDefaults.getMapper()).start().block();
            }
        } else if ("legacy".equals(stack)) {
            if (port != null) {
                var provider = HttpServletStreamableServerTransportProvider.builder().mcpEndpoint("/mcp").build();
                legacy(McpServer.sync(provider));
                serveHttp(provider, port);
            } else {
                legacy(McpServer.sync(new StdioServerTransportProvider(McpJsonDefaults.getMapper())));
                new CountDownLatch(1).await();
            }
        } else {
            System.err.println("-stack modern or -stack legacy is needed");
            System.exit(2);
        }
    }
}
