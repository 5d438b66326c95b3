//===- Agent.cpp - the phone agent's loop ---------------------------------===//
#include "Agent.h"

#include "Screen.h"

#include "spark/text.h"

#include <cstdlib>
#include <memory>

namespace agent {

using nlohmann::json;

bool parseReply(const std::string &text, size_t thinkBudget, ToolCall &call) {
  spark_tool_parser *raw = nullptr;
  if (spark_tool_parser_create(thinkBudget, &raw) != SPARK_TEXT_OK)
    return false;
  std::unique_ptr<spark_tool_parser, void (*)(spark_tool_parser *)> parser(
      raw, spark_tool_parser_destroy);
  spark_tool_parser_feed(parser.get(), text.data(), text.size());
  spark_tool_parser_finish(parser.get());
  call = ToolCall();
  bool found = false;
  spark_tool_event e;
  while (spark_tool_parser_next(parser.get(), &e)) {
    if (e.kind == SPARK_TOOL_EVENT_THINKING && !found)
      call.thinking += e.text;
    else if (e.kind == SPARK_TOOL_EVENT_RECOVERY && !found)
      call.recoveries.push_back(e.text);
    else if (e.kind == SPARK_TOOL_EVENT_CALL && !found) {
      call.name = e.name;
      call.arguments = json::parse(e.arguments_json, nullptr, /*allow_exceptions=*/false);
      if (!call.arguments.is_object())
        call.arguments = json::object();
      found = true;
    }
  }
  return found;
}

bool Agent::screen(std::string &rendered, std::vector<std::pair<int, int>> &targets,
                   std::string &error) {
  std::string xml;
  if (!device.dump(xml, error))
    return false;
  Screen s;
  if (!parseScreen(xml, s, error))
    return false;
  rendered = s.render();
  targets.clear();
  for (const Element &e : s.elements)
    targets.emplace_back(e.x, e.y);
  return true;
}

namespace {

/// An argument as text (the template writes every value as given).
std::string argument(const json &args, const char *key) {
  auto it = args.find(key);
  if (it == args.end())
    return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

} // namespace

bool Agent::act(const ToolCall &call, const std::vector<std::pair<int, int>> &targets,
                std::string &note) {
  const json &a = call.arguments;
  const std::string &name = call.name;
  if (name == "tap") {
    std::string index = argument(a, "index");
    char *end = nullptr;
    long i = std::strtol(index.c_str(), &end, 10);
    if (index.empty() || *end || i < 0 || i >= long(targets.size())) {
      note = "There is no element [" + index + "] on this screen.";
      return true;
    }
    return device.tap(targets[size_t(i)].first, targets[size_t(i)].second, note);
  }
  if (name == "type_text")
    return device.typeText(argument(a, "text"), note);
  if (name == "swipe")
    return device.swipe(argument(a, "direction"), note);
  if (name == "press_key")
    return device.pressKey(argument(a, "key"), note);
  if (name == "open_app")
    return device.openApp(argument(a, "name"), note);
  note = "There is no tool named '" + name +
         "'; the tools are tap, type_text, swipe, press_key, open_app, task_complete.";
  return true;
}

RunResult Agent::run(const std::string &task, const std::function<void(int)> &onStep) {
  RunResult result;
  std::string shown, error;
  std::vector<std::pair<int, int>> targets;
  if (!screen(shown, targets, error)) {
    result.failure = error;
    return result;
  }
  json messages = json::array();
  messages.push_back({{"role", "system"}, {"content", options.systemPrompt}});
  messages.push_back({{"role", "user"}, {"content", "Task: " + task + "\n" + shown}});
  for (int i = 0; i < options.maxSteps; ++i) {
    Step step;
    step.screen = shown;
    if (!model.reply(messages, step.reply, error)) {
      result.failure = "model: " + error;
      result.steps.push_back(step);
      return result;
    }
    if (!parseReply(step.reply, options.thinkBudget, step.call)) {
      step.note = "Call exactly one tool.";
      messages.push_back({{"role", "assistant"}, {"content", step.reply}});
      messages.push_back({{"role", "user"}, {"content", step.note}});
      result.steps.push_back(step);
      continue;
    }
    // The call as the template writes calls: arguments as strings.
    json arguments = json::object();
    for (auto &[key, value] : step.call.arguments.items())
      arguments[key] = value.is_string() ? value.get<std::string>() : value.dump();
    messages.push_back(
        {{"role", "assistant"},
         {"content", "<think>" + step.call.thinking + "</think>"},
         {"tool_calls",
          json::array({{{"type", "function"},
                        {"function", {{"name", step.call.name}, {"arguments", arguments}}}}})}});
    if (step.call.name == "task_complete") {
      result.completed = true;
      result.message = argument(step.call.arguments, "message");
      result.steps.push_back(step);
      if (onStep)
        onStep(i);
      return result;
    }
    if (!act(step.call, targets, step.note)) {
      result.failure = "device: " + step.note;
      result.steps.push_back(step);
      return result;
    }
    if (onStep)
      onStep(i);
    std::string next;
    if (!screen(next, targets, error)) {
      result.failure = "device: " + error;
      result.steps.push_back(step);
      return result;
    }
    std::string content = next;
    if (!step.note.empty())
      content += "\n" + step.note;
    else if (next == shown)
      content += "\n" + (step.note = "The screen did not change.");
    messages.push_back({{"role", "tool"}, {"content", content}});
    shown = next;
    result.steps.push_back(step);
  }
  return result;
}

} // namespace agent
