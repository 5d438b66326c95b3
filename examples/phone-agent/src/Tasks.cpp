//===- Tasks.cpp - held-out tasks on the simulated phone ------------------===//
#include "Tasks.h"

namespace agent {

namespace {

PhoneState basePhone() {
  PhoneState s;
  s.homeApps = {"Weather", "Clock", "Maps", "Settings", "Music", "Messages", "Notes",
                "Camera", "Files"};
  s.chats = {"Ana", "Kai", "Lena", "Omar", "Priya"};
  s.alarms = {{6, 30, true}, {8, 15, false}, {21, 0, true}};
  return s;
}

bool sentTo(const PhoneState &s, const std::string &who, const std::string &text) {
  for (const auto &[contact, body] : s.sent)
    if (contact == who && body == text)
      return true;
  return false;
}

bool alarmIs(const PhoneState &s, int h, int m, bool on) {
  for (const Alarm &a : s.alarms)
    if (a.hour == h && a.minute == m)
      return a.on == on;
  return false;
}

} // namespace

std::vector<Task> heldOutTasks() {
  std::vector<Task> tasks;
  auto add = [&](std::string name, std::string instruction, PhoneState start,
                 std::function<bool(const PhoneState &)> goal) {
    tasks.push_back({std::move(name), std::move(instruction), std::move(start), std::move(goal)});
  };
  PhoneState s = basePhone();
  add("wifi-on", "Make sure Wi-Fi is on", s, [](const PhoneState &p) { return p.wifi; });
  s = basePhone();
  s.bluetooth = true;
  add("bluetooth-off", "Make sure Bluetooth is off", s,
      [](const PhoneState &p) { return !p.bluetooth; });
  s = basePhone();
  add("dark-on", "Make sure dark theme is on", s, [](const PhoneState &p) { return p.dark; });
  s = basePhone();
  s.airplane = true;
  add("airplane-off", "Make sure airplane mode is off", s,
      [](const PhoneState &p) { return !p.airplane; });
  s = basePhone();
  s.wifi = true;
  add("wifi-already-on", "Make sure Wi-Fi is on", s, [](const PhoneState &p) { return p.wifi; });
  s = basePhone();
  add("alarm-7-45", "Create a 7:45 AM alarm", s,
      [](const PhoneState &p) { return alarmIs(p, 7, 45, true); });
  s = basePhone();
  add("alarm-off-6-30", "Switch off the alarm at 6:30 AM", s,
      [](const PhoneState &p) { return alarmIs(p, 6, 30, false); });
  s = basePhone();
  add("alarm-off-9-pm", "Switch off the alarm at 9:00 PM", s,
      [](const PhoneState &p) { return alarmIs(p, 21, 0, false); });
  s = basePhone();
  add("message-kai", "Message Kai: See you at noon", s,
      [](const PhoneState &p) { return sentTo(p, "Kai", "See you at noon"); });
  s = basePhone();
  add("message-lena", "Message Lena: I am on my way", s,
      [](const PhoneState &p) { return sentTo(p, "Lena", "I am on my way"); });
  s = basePhone();
  add("photo", "Open the camera and take a photo", s,
      [](const PhoneState &p) { return p.photos > 0; });
  s = basePhone();
  s.screen = "camera";
  add("bluetooth-on-from-camera", "Make sure Bluetooth is on", s,
      [](const PhoneState &p) { return p.bluetooth; });
  // The same kinds of task in phrasings of the training set (on phones of
  // their own): what the model learnt, apart from new wording.
  s = basePhone();
  add("seen:wifi-on", "Turn on Wi-Fi", s, [](const PhoneState &p) { return p.wifi; });
  s = basePhone();
  s.bluetooth = true;
  add("seen:bluetooth-off", "Turn off Bluetooth", s,
      [](const PhoneState &p) { return !p.bluetooth; });
  s = basePhone();
  add("seen:alarm-7-45", "Set an alarm for 7:45 AM", s,
      [](const PhoneState &p) { return alarmIs(p, 7, 45, true); });
  s = basePhone();
  add("seen:alarm-off-6-30", "Turn off the 6:30 AM alarm", s,
      [](const PhoneState &p) { return alarmIs(p, 6, 30, false); });
  s = basePhone();
  add("seen:message-kai", "Send Kai a message: See you at noon", s,
      [](const PhoneState &p) { return sentTo(p, "Kai", "See you at noon"); });
  s = basePhone();
  add("seen:photo", "Take a photo", s, [](const PhoneState &p) { return p.photos > 0; });
  return tasks;
}

TaskOutcome runTask(const Task &task, Model &model, const AgentOptions &options) {
  SimulatedPhone phone(task.start);
  Agent agent(model, phone, options);
  TaskOutcome outcome;
  outcome.task = task.name;
  outcome.reached = task.goal(phone.state());
  bool reachedByAgent = false;
  outcome.run = agent.run(task.instruction, [&](int) {
    if (task.goal(phone.state()))
      reachedByAgent = true;
  });
  bool done = task.goal(phone.state());
  outcome.reached = outcome.reached || reachedByAgent;
  outcome.undone = outcome.reached && !done;
  outcome.success = outcome.run.completed && done && outcome.run.failure.empty();
  outcome.steps = int(outcome.run.steps.size());
  return outcome;
}

} // namespace agent
