// The dsched contract from TypeScript (Node): creates a project and a workflow, puts the workflow
// online, starts it, watches the instance's events, follows a task's log while the task runs, and
// exits 0 only if the instance SUCCEEDED.
//
//   node dist/example.js --server 127.0.0.1:5678 --project demo
//
// The wire code is generated from protos/ by ../build.sh (src/gen); calls go over gRPC with
// Connect's gRPC transport. Errors carry a google.rpc.ErrorInfo whose reason is an ErrorReason
// value name (without the ERROR_REASON_ prefix, as protoc-gen-es names enum values).
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  InstanceEventKind,
  ReleaseState,
  TaskInstanceState,
  WorkflowInstanceState,
} from "./gen/dsched/v1/enums_pb.js";
import { ErrorReason } from "./gen/dsched/v1/error_reason_pb.js";
import { LogService } from "./gen/dsched/v1/log_service_pb.js";
import { MasterService } from "./gen/dsched/v1/master_service_pb.js";
import type { InstanceEvent } from "./gen/dsched/v1/resources_pb.js";
import { BadRequestSchema, ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";

/** The task whose log the example follows; it prints a few lines slowly enough to be followed. */
const FOLLOWED = "hello";
const WORKFLOW = "hello-ts";

function option(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 && at + 1 < process.argv.length ? process.argv[at + 1] : fallback;
}

/** The wire string of a reason: its enum value name (protoc-gen-es drops the prefix). */
function reasonName(reason: ErrorReason): string {
  return ErrorReason[reason];
}

/** The ErrorInfo reason of a dsched error (domain "dsched"), or "" if it has none. */
function reasonOf(err: unknown): string {
  const info = ConnectError.from(err)
    .findDetails(ErrorInfoSchema)
    .find((i) => i.domain === "dsched");
  return info?.reason ?? "";
}

/** An error with its status code, reason and bad fields. */
function describe(err: unknown): string {
  const ce = ConnectError.from(err);
  const fields = ce
    .findDetails(BadRequestSchema)
    .flatMap((b) => b.fieldViolations.map((v) => `; ${v.field}: ${v.description}`));
  return `${ce.rawMessage} (${Code[ce.code]} ${reasonOf(ce)})${fields.join("")}`;
}

type Master = Client<typeof MasterService>;
type Logs = Client<typeof LogService>;

async function createWorkflow(master: Master, project: string): Promise<void> {
  const alreadyExists = reasonName(ErrorReason.ALREADY_EXISTS);
  try {
    await master.createProject({ project: { name: project, description: "created by the TS example" } });
  } catch (err) {
    if (reasonOf(err) !== alreadyExists) throw err;
  }
  const script = 'for i in 1 2 3; do echo "hello from ${who} $i"; sleep 0.3; done';
  try {
    await master.createWorkflow({
      workflow: {
        project,
        name: WORKFLOW,
        params: { who: "nobody" },
        tasks: [
          { name: FOLLOWED, kind: { case: "shell", value: { script } } },
          { name: "bye", upstreamTasks: [FOLLOWED], kind: { case: "shell", value: { script: "echo bye" } } },
        ],
      },
    });
  } catch (err) {
    if (reasonOf(err) !== alreadyExists) throw err;
    console.log(`workflow ${project}/${WORKFLOW} exists; running it`);
  }
  await master.setWorkflowReleaseState({ project, name: WORKFLOW, releaseState: ReleaseState.ONLINE });
  console.log(`workflow ${project}/${WORKFLOW} online`);
}

function printEvent(e: InstanceEvent): void {
  const task = e.taskInstanceId !== 0n;
  const who = task ? e.taskName : "workflow";
  const state = task ? TaskInstanceState[e.taskState] : WorkflowInstanceState[e.workflowState];
  console.log(`event ${e.sequence} ${InstanceEventKind[e.kind]} ${who} ${state} ${e.message}`);
}

/** Prints a task's log line by line as it is written, until the task instance is terminal. */
async function follow(logs: Logs, taskInstanceId: bigint, signal: AbortSignal): Promise<void> {
  const decoder = new TextDecoder();
  let pending = "";
  for await (const chunk of logs.tailTaskLog({ taskInstanceId, follow: true }, { signal })) {
    pending += decoder.decode(chunk.data, { stream: true });
    const lines = pending.split("\n");
    pending = lines.pop() ?? "";
    for (const line of lines) console.log(`log ${FOLLOWED}: ${line}`);
    if (chunk.endOfLog) break;
  }
  pending += decoder.decode();
  if (pending) console.log(`log ${FOLLOWED}: ${pending}`);
  console.log(`log ${FOLLOWED}: end`);
}

/** Prints the instance's events until the stream ends (the instance is terminal), following the
 * log of FOLLOWED from the moment it runs; returns the final state. */
async function watch(master: Master, logs: Logs, id: bigint, signal: AbortSignal): Promise<WorkflowInstanceState> {
  let state = WorkflowInstanceState.UNSPECIFIED;
  let tail: Promise<void> | undefined;
  for await (const frame of master.watchWorkflowInstance({ id }, { signal })) {
    state = frame.state;
    for (const e of frame.events) {
      printEvent(e);
      if (e.taskName === FOLLOWED && e.taskState === TaskInstanceState.RUNNING && !tail) {
        tail = follow(logs, e.taskInstanceId, signal);
      }
    }
  }
  await tail;
  return state;
}

async function main(): Promise<number> {
  const server = option("server", "127.0.0.1:5678");
  const project = option("project", "ts-example");
  const signal = AbortSignal.timeout(Number(option("timeout-ms", "120000")));
  const transport = createGrpcTransport({ baseUrl: `http://${server}` });
  const master = createClient(MasterService, transport);
  const logs = createClient(LogService, transport);

  await createWorkflow(master, project);
  const started = await master.startWorkflow({ project, workflow: WORKFLOW, params: { who: "typescript" } }, { signal });
  const instance = started.instance;
  if (!instance) throw new Error("StartWorkflow answered no instance");
  console.log(`instance ${instance.id} ${WorkflowInstanceState[instance.state]}`);
  const final = await watch(master, logs, instance.id, signal);
  console.log(`instance ${instance.id} ${WorkflowInstanceState[final]}`);
  return final === WorkflowInstanceState.SUCCEEDED ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`error: ${describe(err)}`);
    process.exit(1);
  },
);
