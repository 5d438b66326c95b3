//===- AgentTest.cpp - the phone agent's loop with a scripted model -------===//
#include "Agent.h"
#include "Screen.h"
#include "SimulatedPhone.h"
#include "Tasks.h"

#include <gtest/gtest.h>

#include <map>

using namespace agent;

namespace {

/// Answers with the next reply of its script, and keeps what it was asked.
class ScriptedModel : public Model {
public:
  explicit ScriptedModel(std::vector<std::string> replies) : replies(std::move(replies)) {}
  bool reply(const nlohmann::json &messages, std::string &text, std::string &error) override {
    asked.push_back(messages);
    if (next >= replies.size()) {
      error = "the script ran out";
      return false;
    }
    text = replies[next++];
    return true;
  }
  std::vector<nlohmann::json> asked;

private:
  std::vector<std::string> replies;
  size_t next = 0;
};

std::string call(const std::string &name, const std::string &key, const std::string &value) {
  return "<think>ok</think><tool_call>" + name + "<arg_key>" + key + "</arg_key><arg_value>" +
         value + "</arg_value></tool_call>";
}

PhoneState phone() {
  PhoneState s;
  s.homeApps = {"Clock", "Settings", "Messages", "Camera"};
  s.chats = {"Ana", "Kai"};
  s.alarms = {{6, 30, true}, {21, 0, false}};
  return s;
}

std::string screenOf(SimulatedPhone &p) {
  std::string xml, error;
  EXPECT_TRUE(p.dump(xml, error));
  Screen s;
  EXPECT_TRUE(parseScreen(xml, s, error)) << error;
  return s.render();
}

} // namespace

// The lists read exactly as in spark-nano's training episodes
// (tools/train/nano_data.py, Phone.render).
TEST(Screen, SimulatedScreensReadAsInTraining) {
  SimulatedPhone p(phone());
  EXPECT_EQ(screenOf(p), "Screen: Home\n[0] Clock (app)\n[1] Settings (app)\n"
                         "[2] Messages (app)\n[3] Camera (app)");
  std::string error;
  p.openApp("Settings", error);
  p.tap(540, 260, error); // row 0: Network & internet
  EXPECT_EQ(screenOf(p), "Screen: Network & internet\n[0] Wi-Fi (switch, off)\n"
                         "[1] Mobile network\n[2] Airplane mode (switch, off)\n[3] Hotspot");
  p.openApp("Clock", error);
  p.tap(540, 260, error); // the Alarm tab
  EXPECT_EQ(screenOf(p), "Screen: Alarms\n[0] 6:30 AM (switch, on)\n"
                         "[1] 9:00 PM (switch, off)\n[2] Add alarm (button)");
  p.tap(540, 500, error); // Add alarm
  p.typeText("7:45 AM", error);
  EXPECT_EQ(screenOf(p), "Screen: New alarm\n[0] Time field (text, 7:45 AM)\n"
                         "[1] Cancel (button)\n[2] Save (button)");
  p.tap(540, 500, error); // Save
  EXPECT_EQ(screenOf(p), "Screen: Alarms\n[0] 6:30 AM (switch, on)\n[1] 7:45 AM (switch, on)\n"
                         "[2] 9:00 PM (switch, off)\n[3] Add alarm (button)");
}

TEST(Screen, RealDumpsAndBrokenXml) {
  // A fragment of a real `uiautomator dump`: nodes nest; only clickable or
  // checkable ones with a label are listed; & is escaped.
  const char *xml = R"(<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>
<hierarchy rotation="0"><node index="0" text="" resource-id="" class="android.widget.FrameLayout"
 package="com.android.settings" content-desc="" checkable="false" checked="false"
 clickable="false" bounds="[0,0][1080,2400]"><node index="0" text="Wi&#8209;Fi &amp; more"
 resource-id="android:id/title" class="android.widget.TextView" package="com.android.settings"
 content-desc="" checkable="false" checked="false" clickable="false" bounds="[0,0][10,10]"/>
<node index="1" text="Use Wi-Fi" resource-id="com.android.settings:id/switch_widget"
 class="android.widget.Switch" package="com.android.settings" content-desc="" checkable="true"
 checked="true" clickable="true" bounds="[900,300][1040,400]"/><node index="2" text=""
 resource-id="" class="android.widget.ImageView" package="com.android.settings" content-desc=""
 checkable="false" checked="false" clickable="true" bounds="[0,0][1,1]"/></node></hierarchy>)";
  Screen s;
  std::string error;
  ASSERT_TRUE(parseScreen(xml, s, error)) << error;
  EXPECT_EQ(s.render(), "Screen: Wi\u2011Fi & more\n[0] Use Wi-Fi (switch, on)");
  EXPECT_EQ(s.elements[0].x, 970);
  EXPECT_EQ(s.elements[0].y, 350);
  EXPECT_FALSE(parseScreen("<hierarchy><node", s, error));
  EXPECT_NE(error.find("screen dump:"), std::string::npos) << error;
}

TEST(Agent, CompletesATaskAndSaysWhenTheScreenDidNotChange) {
  SimulatedPhone p(phone());
  ScriptedModel model({call("open_app", "name", "Settings"),
                       call("tap", "index", "0"),            // Network & internet
                       call("swipe", "direction", "down"),   // nothing moves
                       call("tap", "index", "0"),            // Wi-Fi on
                       call("task_complete", "message", "Wi-Fi is on.")});
  AgentOptions options;
  RunResult run = Agent(model, p, options).run("Make sure Wi-Fi is on");
  EXPECT_TRUE(run.failure.empty()) << run.failure;
  ASSERT_TRUE(run.completed);
  EXPECT_EQ(run.message, "Wi-Fi is on.");
  EXPECT_TRUE(p.state().wifi);
  ASSERT_EQ(run.steps.size(), 5u);
  EXPECT_EQ(run.steps[2].note, "The screen did not change.");
  // What the model was asked: the system prompt, then the task and screen,
  // then each call and the screen after it.
  const nlohmann::json &last = model.asked.back();
  EXPECT_EQ(last[0]["role"], "system");
  EXPECT_EQ(last[1]["content"], "Task: Make sure Wi-Fi is on\nScreen: Home\n[0] Clock (app)\n"
                                "[1] Settings (app)\n[2] Messages (app)\n[3] Camera (app)");
  EXPECT_EQ(last[2]["tool_calls"][0]["function"]["name"], "open_app");
  EXPECT_EQ(last[2]["tool_calls"][0]["function"]["arguments"]["name"], "Settings");
  EXPECT_EQ(last[3]["role"], "tool");
  EXPECT_EQ(last[7]["content"], std::string(last[5]["content"]) + "\nThe screen did not change.");
}

TEST(Agent, BadCallsAreAnsweredAndTheBudgetEndsTheRun) {
  SimulatedPhone p(phone());
  ScriptedModel model({"I am not sure what to do.",            // no call
                       call("tap", "index", "9"),              // no such element
                       call("fly", "to", "moon"),              // no such tool
                       "[tap] {\"index\": 1}"});               // recovered: Settings
  AgentOptions options;
  options.maxSteps = 4;
  RunResult run = Agent(model, p, options).run("Make sure Wi-Fi is on");
  EXPECT_FALSE(run.completed);
  ASSERT_EQ(run.steps.size(), 4u);
  EXPECT_EQ(run.steps[0].note, "Call exactly one tool.");
  EXPECT_EQ(run.steps[1].note, "There is no element [9] on this screen.");
  EXPECT_NE(run.steps[2].note.find("no tool named 'fly'"), std::string::npos);
  EXPECT_EQ(run.steps[3].call.name, "tap");
  EXPECT_FALSE(run.steps[3].call.recoveries.empty());
  EXPECT_EQ(p.state().screen, "settings");
}

TEST(Tasks, UndoingAFinishedTaskIsMeasured) {
  // The goal reached (Wi-Fi on), then undone (off again), then "done".
  Task wifi;
  for (const Task &t : heldOutTasks())
    if (t.name == "wifi-on")
      wifi = t;
  ASSERT_FALSE(wifi.name.empty());
  ScriptedModel undo({call("open_app", "name", "Settings"), call("tap", "index", "0"),
                      call("tap", "index", "0"), call("tap", "index", "0"),
                      call("task_complete", "message", "Done.")});
  TaskOutcome o = runTask(wifi, undo, AgentOptions());
  EXPECT_TRUE(o.run.completed);
  EXPECT_TRUE(o.reached);
  EXPECT_TRUE(o.undone);
  EXPECT_FALSE(o.success);
  ScriptedModel right({call("open_app", "name", "Settings"), call("tap", "index", "0"),
                       call("tap", "index", "0"), call("task_complete", "message", "Done.")});
  o = runTask(wifi, right, AgentOptions());
  EXPECT_TRUE(o.success);
  EXPECT_FALSE(o.undone);
  EXPECT_EQ(o.steps, 4);
}

TEST(Tasks, EveryHeldOutTaskHasAScriptedSolution) {
  // The tasks are solvable on the simulator: a check of the tasks, not of a
  // model. Solutions by task name.
  std::map<std::string, std::vector<std::string>> solutions = {
      {"wifi-on", {call("open_app", "name", "Settings"), call("tap", "index", "0"),
                   call("tap", "index", "0")}},
      {"bluetooth-off", {call("open_app", "name", "Settings"), call("tap", "index", "1"),
                         call("tap", "index", "0")}},
      {"dark-on", {call("open_app", "name", "Settings"), call("tap", "index", "2"),
                   call("tap", "index", "1")}},
      {"airplane-off", {call("open_app", "name", "Settings"), call("tap", "index", "0"),
                        call("tap", "index", "2")}},
      {"wifi-already-on", {}},
      {"alarm-7-45", {call("open_app", "name", "Clock"), call("tap", "index", "0"),
                      call("tap", "index", "3"), call("type_text", "text", "7:45 AM"),
                      call("tap", "index", "2")}},
      {"alarm-off-6-30", {call("open_app", "name", "Clock"), call("tap", "index", "0"),
                          call("tap", "index", "0")}},
      {"alarm-off-9-pm", {call("open_app", "name", "Clock"), call("tap", "index", "0"),
                          call("tap", "index", "2")}},
      {"message-kai", {call("open_app", "name", "Messages"), call("tap", "index", "2"),
                       call("type_text", "text", "See you at noon"), call("tap", "index", "1")}},
      {"message-lena", {call("open_app", "name", "Messages"), call("tap", "index", "3"),
                        call("type_text", "text", "I am on my way"), call("tap", "index", "1")}},
      {"photo", {call("open_app", "name", "Camera"), call("tap", "index", "0")}},
      {"bluetooth-on-from-camera", {call("press_key", "key", "home"),
                                    call("open_app", "name", "Settings"),
                                    call("tap", "index", "1"), call("tap", "index", "0")}},
  };
  for (const char *seen : {"wifi-on", "bluetooth-off", "alarm-7-45", "alarm-off-6-30",
                           "message-kai", "photo"})
    solutions[std::string("seen:") + seen] = solutions[seen];
  for (const Task &t : heldOutTasks()) {
    ASSERT_TRUE(solutions.count(t.name)) << t.name;
    std::vector<std::string> script = solutions[t.name];
    script.push_back(call("task_complete", "message", "Done."));
    ScriptedModel model(script);
    TaskOutcome o = runTask(t, model, AgentOptions());
    EXPECT_TRUE(o.success) << t.name << ": " << o.run.failure;
  }
}
