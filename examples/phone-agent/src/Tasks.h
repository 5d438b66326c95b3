//===- Tasks.h - held-out tasks on the simulated phone --------------------===//
//
// Each task: an instruction, the phone's state when it starts, and the
// state that means "done". Twelve are in phrasings spark-nano never saw in
// training (tools/train/nano_data.py holds the last phrasing of each kind
// out); six ("seen:") in training phrasings, on phones of their own. A run
// succeeds when the model calls task_complete with the goal state reached;
// it "undid" the task when the goal state was reached at some step and is
// gone at the end.
//
//===----------------------------------------------------------------------===//
#ifndef PHONE_AGENT_TASKS_H
#define PHONE_AGENT_TASKS_H

#include "Agent.h"
#include "SimulatedPhone.h"

#include <functional>
#include <string>
#include <vector>

namespace agent {

struct Task {
  std::string name, instruction;
  PhoneState start;
  std::function<bool(const PhoneState &)> goal;
};

std::vector<Task> heldOutTasks();

struct TaskOutcome {
  std::string task;
  bool success = false;   // task_complete with the goal state
  bool reached = false;   // the goal state at some step
  bool undone = false;    // reached, then lost
  int steps = 0;
  RunResult run;
};

/// Runs `task` with `model` on a fresh simulated phone.
TaskOutcome runTask(const Task &task, Model &model, const AgentOptions &options);

} // namespace agent

#endif
