//! The reference tool, `slow_op`: a call started (its arguments checked, its progress
//! token kept), and each step of its work with the progress it reports.

use std::time::Duration;

use serde_json::{json, Value};

use crate::model::backend::BackendCall;
use crate::model::mutant::Mutant;
use crate::model::server_eras::JobKey;
use crate::model::tasks::{result_of, verify_state};
use crate::model::{StreamId, Transport};
use crate::time::Time;
use crate::wire::{
    codes, ErrorResponse, Progress, ProgressToken, Request, ResultType, EXTENSION_TASKS,
};

use super::config::{ResponseMode, CALL_TAG, MAX_INPUT_ROUNDS, MAX_STEPS, SLOW_TOOL};
use super::{Job, Server};

impl Server {
    pub(super) fn start_tool(&mut self, now: Time, stream: Option<StreamId>, r: Request) {
        let name = r.params.get("name").and_then(Value::as_str);
        let arguments = r.params.get("arguments").cloned().unwrap_or(json!({}));
        let args = arguments.as_object();
        let arg = |key: &str, default: u64| {
            args.and_then(|a| a.get(key))
                .map_or(Some(default), Value::as_u64)
        };
        let parsed = (
            name,
            arg("steps", 3),
            arg("step_ms", 1000),
            arg("input_rounds", 0),
        );
        let (steps, step_ms, rounds) = match parsed {
            (Some(SLOW_TOOL), Some(steps), Some(step_ms), Some(rounds))
                if steps <= MAX_STEPS && rounds <= MAX_INPUT_ROUNDS =>
            {
                (steps as u32, step_ms, rounds)
            }
            _ => {
                let e = ErrorResponse::new(Some(r.id), codes::INVALID_PARAMS, format!("unknown tool or bad arguments; call {SLOW_TOOL} with integer steps, step_ms and input_rounds"));
                return self.respond(stream, e.into(), 200);
            }
        };
        let remembered = self.tasks_declared && self.mutant(Mutant::CapabilitiesRemembered);
        self.tasks_declared |= r.declares_tasks();
        let wants_task =
            r.declares_tasks() || remembered || self.mutant(Mutant::TaskWithoutNegotiation);
        if args.and_then(|a| a.get("task")) == Some(&json!("required")) && !wants_task {
            let mut e = ErrorResponse::new(
                Some(r.id),
                codes::MISSING_REQUIRED_CLIENT_CAPABILITY,
                "this tool runs only as a task: declare the Tasks extension",
            );
            e.error.data =
                Some(json!({"requiredCapabilities": {"extensions": {EXTENSION_TASKS: {}}}}));
            return self.respond(stream, e.into(), 400);
        }
        // Multi round-trip: the rounds answered so far are vouched for by the requestState the
        // client echoed; the server itself remembers nothing between rounds (§6, §7.2).
        let answered = match r.params.get("requestState") {
            None => 0,
            Some(state) => match state.as_str().and_then(|s| verify_state(s, &arguments)) {
                Some(round) => round,
                None => {
                    let e = ErrorResponse::new(
                        Some(r.id),
                        codes::INVALID_PARAMS,
                        "requestState was not written by this server for these arguments",
                    );
                    return self.respond(stream, e.into(), 400);
                }
            },
        };
        if answered < rounds {
            return self.ask_for_input(stream, &r, answered + 1, &arguments);
        }
        let key = self.key(stream, r.id.clone());
        let task = wants_task.then(|| self.tasks.create(now, key.clone()));
        let mut stream_of_job = stream;
        let mut token = r.meta.progress_token;
        if let Some(task_id) = &task {
            let fields = self.task_fields(task_id);
            let created = result_of(r.id.clone(), ResultType::Task, fields);
            if self.mutant(Mutant::TaskProgressAfterCreate) {
                // The 2025-11-25 reading: the token stays live for the task's life, so the
                // result is written as one more event and the stream is held open.
                if let (Some(s), ResponseMode::Sse) = (stream, self.config.behaviour.response_mode)
                {
                    self.sse_start(s);
                }
                self.send(stream, created.into());
            } else {
                self.respond(stream, created.into(), 200);
                stream_of_job = None;
                token = None;
            }
            self.answered.insert(key.clone());
        } else if let (Some(s), ResponseMode::Sse) = (stream, self.config.behaviour.response_mode) {
            self.sse_start(s);
        }
        let step = Duration::from_millis(step_ms);
        let samples = args.and_then(|a| a.get("sample")) == Some(&json!(true));
        let can_ask = stream_of_job.is_none_or(|s| self.open_sse.contains(&s));
        let sampling = (samples && self.legacy_on(stream) && self.seam.samples(stream) && can_ask)
            .then(|| self.ask_to_sample(now, stream_of_job));
        let job = Job {
            stream: stream_of_job,
            token,
            steps,
            step,
            done: 0,
            next_step_at: now + step,
            last_progress_at: None,
            last_write: now,
            task,
            call_tag: args.and_then(|a| a.get(CALL_TAG)).map(|c| match c {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            }),
            sampling,
        };
        if steps > 0 {
            self.backend.push_back(BackendCall::Work {
                request: r.id.clone(),
                step: 0,
            });
        }
        self.jobs.insert(key.clone(), job);
        if steps == 0 {
            self.complete(now, &key);
        }
    }

    /// Finishes one step of a job: progress (if due), then the next step or the result.
    pub(super) fn step(&mut self, now: Time, key: &JobKey) {
        let id = &key.id;
        let min_interval = self.config.behaviour.progress_min_interval;
        let can_stream = self.config.transport == Transport::Stdio
            || self.config.behaviour.response_mode == ResponseMode::Sse;
        let Some(job) = self.jobs.get_mut(key) else {
            return;
        };
        job.done += 1;
        let due = job
            .last_progress_at
            .is_none_or(|t| now.since(t) >= min_interval);
        let mutants = self.config.mutants;
        let token = match &job.token {
            _ if mutants.has(Mutant::NoKeepalive) => None,
            _ if mutants.has(Mutant::ForgedProgressToken) => {
                Some(ProgressToken::String(format!("tool-call-{id}")))
            }
            t => t.clone(),
        };
        let progress = match token {
            Some(token) if due && can_stream => {
                job.last_progress_at = Some(now);
                job.last_write = now;
                let value = if mutants.has(Mutant::FlatProgress) {
                    1.0
                } else {
                    f64::from(job.done)
                };
                let mut p = Progress::new(token, value);
                p.total = Some(f64::from(job.steps));
                Some((job.stream, p))
            }
            _ => None,
        };
        let finished = job.done >= job.steps;
        if !finished {
            job.next_step_at = job.next_step_at + job.step;
            self.backend.push_back(BackendCall::Work {
                request: id.clone(),
                step: job.done,
            });
        }
        if let Some((stream, p)) = progress {
            // The misrouting server writes progress to the newest open stream.
            let stream = match stream {
                Some(_) if mutants.has(Mutant::ProgressMisrouted) => {
                    self.open_sse.iter().next_back().copied().or(stream)
                }
                Some(_) if mutants.has(Mutant::ProgressOnGetStream) => self.listening.or(stream),
                s => s,
            };
            self.send(stream, p.into());
        }
        if finished {
            self.complete(now, key);
        }
    }
}
