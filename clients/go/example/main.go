// Command example shows the dsched contract from Go: it creates a project and a workflow, puts the
// workflow online, starts it, watches the instance's events, follows a task's log while the task
// runs, and exits 0 only if the instance SUCCEEDED.
//
//	example -server 127.0.0.1:5678 -project demo
//
// The wire code is generated from protos/ by ../build.sh (package dschedv1); errors are
// google.rpc.Status with an ErrorInfo whose reason is a dschedv1.ErrorReason value name without its
// ERROR_REASON_ prefix.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	dschedv1 "github.com/dsched/dsched/clients/go/dschedv1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// The task whose log the example follows; it prints a few lines slowly enough to be followed.
const followed = "hello"

func main() {
	server := flag.String("server", "127.0.0.1:5678", "the master's client address")
	project := flag.String("project", "go-example", "the project to create the workflow in")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after this long")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, *server, *project); err != nil {
		fmt.Fprintln(os.Stderr, "error:", describe(err))
		os.Exit(1)
	}
}

func run(ctx context.Context, server, project string) error {
	conn, err := grpc.DialContext(ctx, server, grpc.WithInsecure(), grpc.WithBlock())
	if err != nil {
		return fmt.Errorf("connect to %s: %w", server, err)
	}
	defer conn.Close()
	master := dschedv1.NewMasterServiceClient(conn)
	logs := dschedv1.NewLogServiceClient(conn)

	if err := createWorkflow(ctx, master, project); err != nil {
		return err
	}
	started, err := master.StartWorkflow(ctx, &dschedv1.StartWorkflowRequest{
		Project: project, Workflow: "hello-go", Params: map[string]string{"who": "go"},
	})
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	id := started.GetInstance().GetId()
	fmt.Printf("instance %d %s\n", id, stateName(started.GetInstance().GetState()))

	final, err := watch(ctx, master, logs, id)
	if err != nil {
		return err
	}
	fmt.Printf("instance %d %s\n", id, stateName(final))
	if final != dschedv1.WorkflowInstanceState_WORKFLOW_INSTANCE_STATE_SUCCEEDED {
		return fmt.Errorf("instance %d ended %s", id, stateName(final))
	}
	return nil
}

// createWorkflow creates the project and a two-task workflow (unless they exist) and puts it online.
func createWorkflow(ctx context.Context, master dschedv1.MasterServiceClient, project string) error {
	_, err := master.CreateProject(ctx, &dschedv1.CreateProjectRequest{
		Project: &dschedv1.Project{Name: project, Description: "created by the Go example"},
	})
	if err != nil && reason(err) != reasonName(dschedv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS) {
		return fmt.Errorf("create project: %w", err)
	}
	script := "for i in 1 2 3; do echo \"hello from ${who} $i\"; sleep 0.3; done"
	_, err = master.CreateWorkflow(ctx, &dschedv1.CreateWorkflowRequest{
		Workflow: &dschedv1.Workflow{
			Project: project,
			Name:    "hello-go",
			Params:  map[string]string{"who": "nobody"},
			Tasks: []*dschedv1.TaskDefinition{
				{Name: followed, Kind: &dschedv1.TaskDefinition_Shell{Shell: &dschedv1.ShellTask{Script: script}}},
				{
					Name:          "bye",
					UpstreamTasks: []string{followed},
					Kind:          &dschedv1.TaskDefinition_Shell{Shell: &dschedv1.ShellTask{Script: "echo bye"}},
				},
			},
		},
	})
	if reason(err) == reasonName(dschedv1.ErrorReason_ERROR_REASON_ALREADY_EXISTS) {
		fmt.Printf("workflow %s/hello-go exists; running it\n", project)
	} else if err != nil {
		return fmt.Errorf("create workflow: %w", err)
	}
	_, err = master.SetWorkflowReleaseState(ctx, &dschedv1.SetWorkflowReleaseStateRequest{
		Project: project, Name: "hello-go", ReleaseState: dschedv1.ReleaseState_RELEASE_STATE_ONLINE,
	})
	if err != nil {
		return fmt.Errorf("put online: %w", err)
	}
	fmt.Printf("workflow %s/hello-go online\n", project)
	return nil
}

// watch prints the instance's events until the stream ends (the instance is terminal) and follows
// the log of the task named `followed` from the moment it runs. It returns the final state.
func watch(
	ctx context.Context, master dschedv1.MasterServiceClient, logs dschedv1.LogServiceClient, id int64,
) (dschedv1.WorkflowInstanceState, error) {
	stream, err := master.WatchWorkflowInstance(ctx, &dschedv1.WatchWorkflowInstanceRequest{Id: id})
	if err != nil {
		return 0, fmt.Errorf("watch: %w", err)
	}
	var tails sync.WaitGroup
	var tailErr error
	following := false
	state := dschedv1.WorkflowInstanceState_WORKFLOW_INSTANCE_STATE_UNSPECIFIED
	for {
		frame, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("watch: %w", err)
		}
		state = frame.GetState()
		for _, e := range frame.GetEvents() {
			printEvent(e)
			running := e.GetTaskState() == dschedv1.TaskInstanceState_TASK_INSTANCE_STATE_RUNNING
			if e.GetTaskName() == followed && running && !following {
				following = true
				tails.Add(1)
				go func(taskInstance int64) {
					defer tails.Done()
					tailErr = follow(ctx, logs, taskInstance)
				}(e.GetTaskInstanceId())
			}
		}
	}
	tails.Wait()
	if tailErr != nil {
		return 0, tailErr
	}
	return state, nil
}

// follow prints a task's log line by line as it is written, until the task instance is terminal.
func follow(ctx context.Context, logs dschedv1.LogServiceClient, taskInstance int64) error {
	stream, err := logs.TailTaskLog(ctx, &dschedv1.TailTaskLogRequest{
		TaskInstanceId: taskInstance, Follow: true,
	})
	if err != nil {
		return fmt.Errorf("tail log: %w", err)
	}
	var pending string
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("tail log: %w", err)
		}
		pending += string(chunk.GetData())
		for {
			line, rest, found := strings.Cut(pending, "\n")
			if !found {
				break
			}
			fmt.Printf("log %s: %s\n", followed, line)
			pending = rest
		}
		if chunk.GetEndOfLog() {
			break
		}
	}
	if pending != "" {
		fmt.Printf("log %s: %s\n", followed, pending)
	}
	fmt.Printf("log %s: end\n", followed)
	return nil
}

func printEvent(e *dschedv1.InstanceEvent) {
	who, state := "workflow", stateName(e.GetWorkflowState())
	if e.GetTaskInstanceId() != 0 {
		who = e.GetTaskName()
		state = strings.TrimPrefix(e.GetTaskState().String(), "TASK_INSTANCE_STATE_")
	}
	kind := strings.TrimPrefix(e.GetKind().String(), "INSTANCE_EVENT_KIND_")
	fmt.Printf("event %d %s %s %s %s\n", e.GetSequence(), kind, who, state, e.GetMessage())
}

func stateName(s dschedv1.WorkflowInstanceState) string {
	return strings.TrimPrefix(s.String(), "WORKFLOW_INSTANCE_STATE_")
}

// reasonName is the wire string of a reason: its enum value name without the prefix.
func reasonName(r dschedv1.ErrorReason) string {
	return strings.TrimPrefix(r.String(), "ERROR_REASON_")
}

// reason is the ErrorInfo reason of a dsched error (domain "dsched"), or "" if it has none.
func reason(err error) string {
	st, ok := status.FromError(unwrap(err))
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == "dsched" {
			return info.GetReason()
		}
	}
	return ""
}

// describe renders an error with its status code, reason and bad fields.
func describe(err error) string {
	st, ok := status.FromError(unwrap(err))
	if !ok {
		return err.Error()
	}
	text := fmt.Sprintf("%v (%s %s)", err, st.Code(), reason(err))
	for _, d := range st.Details() {
		if bad, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range bad.GetFieldViolations() {
				text += fmt.Sprintf("; %s: %s", v.GetField(), v.GetDescription())
			}
		}
	}
	return text
}

func unwrap(err error) error {
	for {
		inner := errors.Unwrap(err)
		if inner == nil {
			return err
		}
		err = inner
	}
}
