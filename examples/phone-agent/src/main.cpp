//===- main.cpp - phone-agent: Spark drives a phone -----------------------===//
//
//   phone-agent --task "Make sure Wi-Fi is on"        one task, simulated phone
//   phone-agent --device adb --task "..."             a real phone over adb
//   phone-agent --evaluate [--json report.json]       every held-out task,
//                                                     every build linked in
// The model builds are linked into the program (spark_add_model(), one entry
// point each); --build picks one. README.md has the options and results.
//
//===----------------------------------------------------------------------===//
#include "AdbDevice.h"
#include "SimulatedPhone.h"
#include "SparkModel.h"
#include "Tasks.h"

#include "Builds.h" // generated: kBuilds[], kCheckpoint

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace agent;
using nlohmann::json;

namespace {

const char *kUsage =
    "usage: phone-agent [--task TEXT | --evaluate] [options]\n"
    "  --task TEXT         run one task (default device: the simulated phone)\n"
    "  --evaluate          run every held-out task on the simulated phone with\n"
    "                      each build (or --build) and print the success table\n"
    "  --build NAME        the linked build to use (default: the first)\n"
    "  --pack FILE         its weight pack (default: where the build wrote it)\n"
    "  --checkpoint DIR    tokenizer and chat template (default: the checkpoint\n"
    "                      the builds were compiled from)\n"
    "  --device sim|adb    the phone (default sim); --serial S picks an adb device\n"
    "  --grammar           constrain every reply to one well-formed tool call\n"
    "  --think-tokens N    thinking budget in tokens (default 96; 0: none)\n"
    "  --max-steps N       step budget (default 12)\n"
    "  --threads N         kernel threads (default: one per core)\n"
    "  --json FILE         --evaluate: also write the results as JSON\n"
    "  --verbose           print every step\n";

int usage(const std::string &problem) {
  std::fprintf(stderr, "phone-agent: %s\n%s", problem.c_str(), kUsage);
  return 2;
}

bool readFile(const std::string &path, std::string &out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::ostringstream s;
  s << in.rdbuf();
  out = s.str();
  return true;
}

void printRun(const RunResult &run) {
  for (size_t i = 0; i < run.steps.size(); ++i) {
    const Step &s = run.steps[i];
    std::printf("--- step %zu\n%s\n> %s\n", i + 1, s.screen.c_str(), s.reply.c_str());
    if (!s.call.name.empty())
      std::printf("  call: %s %s\n", s.call.name.c_str(), s.call.arguments.dump().c_str());
    for (const std::string &r : s.call.recoveries)
      std::printf("  recovered: %s\n", r.c_str());
    if (!s.note.empty())
      std::printf("  note: %s\n", s.note.c_str());
  }
}

} // namespace

int main(int argc, char **argv) {
  std::string task, buildName, pack, checkpoint = kCheckpoint, device = "sim", serial, jsonPath;
  bool evaluate = false, verbose = false;
  SparkModelOptions modelOptions;
  AgentOptions agentOptions;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char *name) -> const char * {
      if (i + 1 >= argc) {
        usage(std::string(name) + " needs a value");
        std::exit(2);
      }
      return argv[++i];
    };
    auto number = [&](const char *name, int low, int high) {
      const char *text = value(name);
      char *end;
      long n = std::strtol(text, &end, 10);
      if (*end || n < low || n > high) {
        usage(std::string(name) + " " + text + ": expected a whole number in [" +
              std::to_string(low) + ", " + std::to_string(high) + "]");
        std::exit(2);
      }
      return int(n);
    };
    if (a == "--task") task = value("--task");
    else if (a == "--evaluate") evaluate = true;
    else if (a == "--build") buildName = value("--build");
    else if (a == "--pack") pack = value("--pack");
    else if (a == "--checkpoint") checkpoint = value("--checkpoint");
    else if (a == "--device") device = value("--device");
    else if (a == "--serial") serial = value("--serial");
    else if (a == "--grammar") modelOptions.grammar = true;
    else if (a == "--think-tokens") modelOptions.thinkTokens = number("--think-tokens", 0, 4096);
    else if (a == "--max-steps") agentOptions.maxSteps = number("--max-steps", 1, 100);
    else if (a == "--threads") modelOptions.threads = number("--threads", 0, 256);
    else if (a == "--json") jsonPath = value("--json");
    else if (a == "--verbose") verbose = true;
    else if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else return usage("unknown option " + a);
  }
  if (task.empty() == !evaluate)
    return usage("give --task TEXT or --evaluate");
  if (device != "sim" && device != "adb")
    return usage("--device " + device + ": expected sim or adb");
  if (evaluate && device != "sim")
    return usage("--evaluate runs the held-out tasks on the simulated phone only");
  agentOptions.thinkBudget = size_t(modelOptions.thinkTokens) * 8;
  std::string tools;
  if (!readFile(checkpoint + "/agent-tools.json", tools))
    return usage(checkpoint + "/agent-tools.json: cannot read the tools (JSON list)");
  std::string system;
  if (readFile(checkpoint + "/agent-system.txt", system)) {
    while (!system.empty() && (system.back() == '\n' || system.back() == '\r'))
      system.pop_back();
    agentOptions.systemPrompt = system;
  }

  std::vector<const BuildEntry *> builds;
  for (const BuildEntry &b : kBuilds)
    if (buildName.empty() ? (evaluate || builds.empty()) : buildName == b.name)
      builds.push_back(&b);
  if (builds.empty()) {
    std::string names;
    for (const BuildEntry &b : kBuilds)
      names += std::string(names.empty() ? "" : ", ") + b.name;
    return usage("--build " + buildName + ": this program links " + names);
  }
  if (!pack.empty() && builds.size() != 1)
    return usage("--pack applies to one --build");

  json report = json::array();
  int failures = 0;
  for (const BuildEntry *b : builds) {
    SparkModel model;
    std::string error;
    if (!model.open(b->definition(), pack.empty() ? b->pack : pack, checkpoint, tools,
                    modelOptions, error)) {
      std::fprintf(stderr, "phone-agent: %s: %s\n", b->name, error.c_str());
      return 1;
    }
    if (!evaluate) {
      SimulatedPhone phone{heldOutTasks().front().start};
      AdbDevice adb(serial);
      Device &d = device == "adb" ? static_cast<Device &>(adb) : phone;
      RunResult run = Agent(model, d, agentOptions).run(task);
      printRun(run);
      if (!run.failure.empty()) {
        std::fprintf(stderr, "phone-agent: %s\n", run.failure.c_str());
        return 1;
      }
      std::printf("%s\n", run.completed ? ("done: " + run.message).c_str()
                                        : "stopped: the step budget ran out");
      return run.completed ? 0 : 1;
    }
    int successes = 0, undone = 0, steps = 0;
    std::vector<Task> tasks = heldOutTasks();
    std::printf("%-26s %-8s %5s %7s %6s\n", b->name, "result", "steps", "reached", "undone");
    for (const Task &t : tasks) {
      TaskOutcome o = runTask(t, model, agentOptions);
      if (verbose)
        printRun(o.run);
      successes += o.success;
      undone += o.undone;
      steps += o.steps;
      std::printf("%-26s %-8s %5d %7s %6s%s%s\n", t.name.c_str(),
                  o.success ? "success" : "failed", o.steps, o.reached ? "yes" : "no",
                  o.undone ? "yes" : "no", o.run.failure.empty() ? "" : "  ",
                  o.run.failure.c_str());
      report.push_back({{"build", b->name}, {"task", t.name}, {"success", o.success},
                        {"steps", o.steps}, {"reached", o.reached}, {"undone", o.undone},
                        {"failure", o.run.failure}});
    }
    std::printf("%s: %d of %zu tasks, %d undone, %.1f steps per task, %lld tokens evaluated\n\n",
                b->name, successes, tasks.size(), undone, double(steps) / double(tasks.size()),
                model.tokensEvaluated());
    failures += int(tasks.size()) - successes;
  }
  if (!jsonPath.empty()) {
    std::ofstream out(jsonPath);
    out << report.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "phone-agent: %s: cannot write\n", jsonPath.c_str());
      return 1;
    }
  }
  return 0;
}
