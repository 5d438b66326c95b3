//===- Agent.h - the phone agent's loop -----------------------------------===//
//
// One step: the device's screen (uiautomator XML) becomes the indexed
// element list; the conversation (system prompt, the task with the first
// screen, then each call and the screen after it) goes to the model through
// its chat template with the tools; the reply's tool call (parsed
// tolerantly by spark_text's parser, or constrained by its grammar) becomes
// an action on the device. It ends at task_complete, or at the step budget.
// A screen that did not change is said so in the next message; a reply
// without a call is answered with a reminder.
//
//===----------------------------------------------------------------------===//
#ifndef PHONE_AGENT_AGENT_H
#define PHONE_AGENT_AGENT_H

#include "Device.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace agent {

/// Whatever answers: spark-compile's build of the model, or a script.
class Model {
public:
  virtual ~Model() = default;
  /// The assistant's next turn for `messages` (chat-template messages);
  /// false (and `error`) on failure.
  virtual bool reply(const nlohmann::json &messages, std::string &text,
                     std::string &error) = 0;
};

/// One tool call of a reply.
struct ToolCall {
  std::string name;
  nlohmann::json arguments = nlohmann::json::object();
  std::string thinking;
  std::vector<std::string> recoveries; // what the parser repaired
};

/// The first call in `text` (Spark's format, or what the parser recovers);
/// false when there is none. thinkBudget: bytes after which an unclosed
/// <think> counts as closed (0: no limit).
bool parseReply(const std::string &text, size_t thinkBudget, ToolCall &call);

struct Step {
  std::string screen; // what the model saw
  std::string reply;  // what it said
  ToolCall call;      // what it called (name empty: no call)
  std::string note;   // what the next message told it (no change, error)
};

struct RunResult {
  bool completed = false; // task_complete was called
  std::string message;    // its message
  std::vector<Step> steps;
  std::string failure;    // a device or model failure ended the run
};

struct AgentOptions {
  int maxSteps = 12;
  size_t thinkBudget = 0;
  std::string systemPrompt =
      "You are Spark, an assistant that operates a phone. Read the screen, think "
      "briefly, then call exactly one tool.";
};

class Agent {
public:
  Agent(Model &model, Device &device, AgentOptions options)
      : model(model), device(device), options(std::move(options)) {}
  /// Runs `task`; onStep(step) is called after each action (the evaluation
  /// checks the simulated phone's state there).
  RunResult run(const std::string &task,
                const std::function<void(int)> &onStep = nullptr);

private:
  bool screen(std::string &rendered, std::vector<std::pair<int, int>> &targets,
              std::string &error);
  /// Performs `call`; false on a device failure. `note` tells the model
  /// what went wrong with an action that did nothing.
  bool act(const ToolCall &call, const std::vector<std::pair<int, int>> &targets,
           std::string &note);

  Model &model;
  Device &device;
  AgentOptions options;
};

} // namespace agent

#endif
