// decider_bench: Kueue's scheduler performance profiles (test/performance/scheduler), replayed
// in logical time against the pure decider, and a check that the cost of a decision does not
// grow with the number of pending workloads.
//
// The decider (projections::Engine) is driven directly, with no ledger: every input is a
// canonical Event (built with capnp, decoded with schema::DecodeEvent), applied with
// ApplyInput; after all inputs of one logical instant, one EndBatch runs the admission cycles.
// A discrete-event simulation plays Kueue's runner: workloads are created on the generator's
// schedule, an admitted workload finishes `runtimeMs` after its (last) admission, an eviction
// cancels the pending finish. The figures are those of Kueue's recorder (docs: the Kueue digest
// section 8.3), printed beside Kueue's own from the rangespec files.
//
// Each profile (and the scaling phase) runs in a child process with an address-space limit,
// and every EndBatch under a CPU-time watchdog: admission cycles that never converge would
// otherwise pile decisions up in memory until the machine runs out.
//
// The exit status is non-zero only when the decider misbehaves (a decision that does not
// decode, usage above quota, a workload never admitted or rejected, a read model that
// disagrees with the decisions, an EndBatch that does not return). Goals are printed, never
// enforced. See docs/benchmarks.md for the command, figures and reading.

#include <signal.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <capnp/message.h>
#include <yaml-cpp/yaml.h>

#include "projections/engine.h"
#include "schema/event_codec.h"
#include "kueue_profile.h"

#ifndef DECIDER_BENCH_PROFILE_DIR
#define DECIDER_BENCH_PROFILE_DIR "../shared/kueue-perf"
#endif

namespace admission::bench {
namespace {

using projections::Engine;

// Logical time 0 of every run: 2026-11-29T00:00:00Z.
constexpr int64_t kStartNs = 1'795'910'400'000'000'000;
constexpr int64_t kNsPerMs = 1'000'000;
constexpr double kLargeScaleCpuGoalSeconds = 5.0;
// Limits: the simulation stops (and fails) rather than loop forever on a decider bug.
constexpr uint64_t kInstantsMax = 10'000'000;
constexpr int64_t kLogicalMsMax = 24LL * 3600 * 1000;
// Instants whose ApplyInput + EndBatch take longer than this are printed as they happen.
constexpr double kSlowInstantCpuSeconds = 0.5;
constexpr int64_t kSlowInstantsPrintedMax = 20;

// ------------------------------------------------------------------------------------------
// Reporting.

int g_failures = 0;

// Records a decider misbehaviour; the run goes on so every figure still prints, but exits 1.
// Only the first 20 are printed.
void Fail(const std::string& what) {
  ++g_failures;
  if (g_failures <= 20) std::printf("FAIL: %s\n", what.c_str());
  if (g_failures == 20) std::printf("FAIL: (further failures counted, not printed)\n");
  std::fflush(stdout);
}

// Set while a profile is run again for its CPU time only: its lines were printed the first time.
bool g_quiet_lines = false;

void Line(const std::string& name, const std::string& value, const std::string& unit = "") {
  if (g_quiet_lines) return;
  std::printf("%s: %s%s%s\n", name.c_str(), value.c_str(), unit.empty() ? "" : " ",
              unit.c_str());
  std::fflush(stdout);
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Int(int64_t v) { return std::to_string(v); }

// CPU time (user + sys) of the calling thread, in seconds, at nanosecond resolution. The
// bench's work runs on one thread, so this is the process's CPU time; the process clock itself
// is not read, because while the EndBatch watchdog's ITIMER_PROF is armed Linux samples it at
// the scheduler tick (4 ms here), which quantized every short span this bench measures.
double CpuSeconds() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Accumulates the CPU time of many short spans.
class CpuMeter {
 public:
  void Start() { started_ = CpuSeconds(); }
  void Stop() { total_ += CpuSeconds() - started_; }
  double seconds() const { return total_; }

 private:
  double started_ = 0;
  double total_ = 0;
};

// Peak resident set: the kernel's high-water mark since the last ResetPeakRss (VmHWM), and
// getrusage's ru_maxrss (the whole process's peak, never reset).
void ResetPeakRss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";  // 5: reset the peak RSS (Linux >= 4.0)
}

int64_t VmHwmKib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoll(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

int64_t MaxRssKib() {
  struct rusage u {};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

std::string Mib(int64_t kib) { return Fixed(static_cast<double>(kib) / 1024.0, 1); }

// ------------------------------------------------------------------------------------------
// Isolation. A decider whose admission cycles never converge keeps appending decisions inside
// one EndBatch until memory runs out, which on a shared machine takes others down with it. So
// each run goes in a child process with a memory limit, and every EndBatch under a CPU-time
// watchdog that reports where it stopped.

constexpr int kExitWatchdog = 3;
constexpr rlim_t kChildAddressSpaceBytesMax = rlim_t{4} << 30;
double g_end_batch_cpu_seconds_max = 300;
char g_watchdog_message[512] = "EndBatch did not return";

void OnWatchdog(int) {
  // Async-signal-safe: the message was formatted before the timer was armed.
  const size_t n = std::strlen(g_watchdog_message);
  ssize_t ignored = ::write(STDOUT_FILENO, g_watchdog_message, n);
  (void)ignored;
  ::_exit(kExitWatchdog);
}

// Arms a one-shot timer on the process's CPU time (user + sys) around one EndBatch.
class Watchdog {
 public:
  explicit Watchdog(const std::string& what) {
    std::snprintf(g_watchdog_message, sizeof g_watchdog_message,
                  "FAIL: %s did not return within %.0f CPU seconds: its admission cycles do "
                  "not converge, or are far too slow\n",
                  what.c_str(), g_end_batch_cpu_seconds_max);
    struct itimerval t {};
    t.it_value.tv_sec = static_cast<time_t>(g_end_batch_cpu_seconds_max);
    ::setitimer(ITIMER_PROF, &t, nullptr);
  }
  ~Watchdog() {
    struct itimerval t {};
    ::setitimer(ITIMER_PROF, &t, nullptr);
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
};

void InstallWatchdogHandler() {
  struct sigaction sa {};
  sa.sa_handler = OnWatchdog;
  ::sigaction(SIGPROF, &sa, nullptr);
}

// Runs `body` in a child process (unless in_process) and returns the number of failures it
// had; a child killed by a signal or stopped by the watchdog counts as one failure.
int RunIsolated(const std::string& what, bool in_process, const std::function<int()>& body) {
  if (in_process) return body();
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::printf("FAIL: fork for %s: %s\n", what.c_str(), std::strerror(errno));
    return 1;
  }
  if (pid == 0) {
    struct rlimit limit {kChildAddressSpaceBytesMax, kChildAddressSpaceBytesMax};
    ::setrlimit(RLIMIT_AS, &limit);
    g_failures = 0;  // the parent's count is the parent's
    const int failures = body();
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(failures == 0 ? 0 : 1);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  if (WIFEXITED(status) && WEXITSTATUS(status) == kExitWatchdog) {
    std::printf("FAIL: %s stopped by the EndBatch watchdog\n", what.c_str());
  } else if (WIFEXITED(status)) {
    std::printf("FAIL: %s had failures (exit %d)\n", what.c_str(), WEXITSTATUS(status));
  } else if (WIFSIGNALED(status)) {
    std::printf("FAIL: %s killed by signal %d (%s): a failed check, or memory beyond the "
                "child's %d GiB address space (see stderr)\n",
                what.c_str(), WTERMSIG(status), ::strsignal(WTERMSIG(status)),
                static_cast<int>(kChildAddressSpaceBytesMax >> 30));
  }
  std::fflush(stdout);
  return 1;
}

// ------------------------------------------------------------------------------------------
// Events.

// Builds one input event: envelope from the arguments, body filled by `fill`. The last input
// of an instant carries endsBatch, as intake sets it.
std::string BuildEvent(uint64_t seq, int64_t now_ns, bool ends_batch,
                       const std::function<void(schema::Event::Body::Builder)>& fill) {
  capnp::MallocMessageBuilder message(512);
  schema::Event::Builder e = message.initRoot<schema::Event>();
  e.setSequence(seq);
  e.setRecordedAtNs(now_ns);
  e.setActor("decider_bench");
  e.setEndsBatch(ends_batch);
  fill(e.getBody());
  return schema::EncodeEvent(message);
}

// FNV-1a: a deterministic uid that does not favour any ClusterQueue in uid tie-breaks.
std::string UidOf(const std::string& key) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : key) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, h);
  return buf;
}

struct QueueDef {
  std::string name;    // ClusterQueue, its namespace and its LocalQueue
  std::string cohort;
  std::string flavor = "rf";
  int64_t nominal_milli = 0;
  std::optional<int64_t> borrowing_limit_milli;
  schema::ReclaimWithinCohortPolicy reclaim = schema::ReclaimWithinCohortPolicy::NEVER;
  schema::WithinClusterQueuePolicy within = schema::WithinClusterQueuePolicy::NEVER;
};

void FillClusterQueue(schema::Event::Body::Builder body, const QueueDef& q) {
  FillProfileClusterQueue(body, q.name, q.cohort, q.nominal_milli, q.borrowing_limit_milli,
                          q.reclaim, q.within, q.flavor);
}

void FillLocalQueue(schema::Event::Body::Builder body, const QueueDef& q) {
  auto lq = body.initLocalQueueDefined();
  lq.setNamespace(q.name);
  lq.setName(q.name);
  lq.setClusterQueue(q.name);
}

struct WorkloadDef {
  std::string ns, name, uid;
  int32_t priority = 0;
  int64_t cpu_milli = 0;  // per pod
  int64_t creation_ns = 0;
  int32_t count = 1;
  // Kueue's TAS generator: "required", "preferred" or "balanced" (a slice request) at tas_level.
  std::string tas_constraint{}, tas_level{};
  int32_t slice_size = 0;
};

void FillTopologyRequest(schema::PodSet::Builder ps, const WorkloadDef& w) {
  if (w.tas_level.empty()) return;
  auto t = ps.initTopologyRequest();
  if (w.tas_constraint == "required") {
    t.setRequired(w.tas_level);
  } else if (w.tas_constraint == "preferred") {
    t.setPreferred(w.tas_level);
  } else if (w.tas_constraint == "balanced") {  // Kueue's generator: a slice request
    t.setSliceRequiredTopology(w.tas_level);
    if (w.slice_size > 0) t.setSliceSize(w.slice_size);
  } else {
    Fail("unknown tasConstraint " + w.tas_constraint);
  }
}

void FillSubmit(schema::Event::Body::Builder body, const WorkloadDef& w) {
  auto wl = body.initWorkloadSubmitted().initWorkload();
  wl.setNamespace(w.ns);
  wl.setName(w.name);
  wl.setUid(w.uid);
  wl.setQueueName(w.ns);
  wl.setHasPriority(true);
  wl.setPriority(w.priority);
  wl.setCreationTimestampNs(w.creation_ns);
  auto ps = wl.initPodSets(1)[0];
  ps.setName("main");
  ps.setCount(w.count);
  auto req = ps.initRequests(1)[0];
  req.setName("cpu");
  req.setMilli(w.cpu_milli);
  FillTopologyRequest(ps, w);
}

// Adds one input event, its body filled by the function given.
using AddInput = std::function<void(std::function<void(schema::Event::Body::Builder)>)>;

// Kueue's TAS generator (topology_generator.go): a node per leaf of the levels, named
// "node-b0-r2-n15", labelled with each level's value ("block-0", "rack-2", "node-15": the
// hostname values repeat in every rack, as Kueue's generator makes them) and the flavor's
// label; allocatable the last level's capacity and 110 pods.
void AddTasNodes(const TasTopology& t, size_t level, std::vector<std::string>* values,
                 const AddInput& add) {
  if (level == t.levels.size()) {
    std::string name = "node";
    for (const std::string& v : *values) name += "-" + v.substr(0, 1) + v.substr(v.find('-') + 1);
    add([&](schema::Event::Body::Builder b) {
      auto n = b.initNodeCapacityChanged();
      n.setNode(name);
      n.setFlavor(t.flavor);
      auto cap = n.initCapacity(3);
      cap[0].setName("cpu");
      cap[0].setMilli(t.cpu_milli);
      cap[1].setName("memory");
      cap[1].setMilli(t.memory_milli);
      cap[2].setName("pods");
      cap[2].setMilli(110'000);
      auto labels = n.initLabels(static_cast<unsigned>(values->size() + 1));
      for (size_t i = 0; i < values->size(); ++i) {
        labels[static_cast<unsigned>(i)].setKey(t.levels[i].node_label);
        labels[static_cast<unsigned>(i)].setValue((*values)[i]);
      }
      labels[static_cast<unsigned>(values->size())].setKey(t.flavor_node_label);
      labels[static_cast<unsigned>(values->size())].setValue("tas");
    });
    return;
  }
  for (int i = 0; i < t.levels[level].count; ++i) {
    values->push_back(t.levels[level].name + "-" + std::to_string(i));
    AddTasNodes(t, level + 1, values, add);
    values->pop_back();
  }
}

// The TAS flavor (nodeLabels {nodeLabel: tas}, topologyName), the Topology and its nodes.
void AddTasDefinitions(const TasTopology& t, const AddInput& add) {
  add([&](schema::Event::Body::Builder b) {
    auto f = b.initFlavorDefined();
    f.setName(t.flavor);
    auto label = f.initNodeLabels(1)[0];
    label.setKey(t.flavor_node_label);
    label.setValue("tas");
    f.setTopologyName(t.flavor_topology);
  });
  add([&](schema::Event::Body::Builder b) {
    auto d = b.initTopologyDefined();
    d.setName(t.name);
    auto levels = d.initLevels(static_cast<unsigned>(t.levels.size()));
    for (size_t i = 0; i < t.levels.size(); ++i) {
      levels.set(static_cast<unsigned>(i), t.levels[i].node_label);
    }
  });
  std::vector<std::string> values;
  AddTasNodes(t, 0, &values, add);
}

int64_t TasNodes(const TasTopology& t) {
  int64_t n = 1;
  for (const TasLevel& l : t.levels) n *= l.count;
  return n;
}

// The domains of each level of the flavor's snapshot, as the decider keeps them.
std::string TasDomains(const Engine& engine, const TasTopology& t) {
  const std::optional<int> id = engine.flavor_names().Find(t.flavor);
  const projections::TasSnapshot* snap = id ? engine.TasFor(*id) : nullptr;
  if (snap == nullptr) return "no TAS snapshot";
  std::string out;
  for (size_t l = 0; l < t.levels.size(); ++l) {
    out += (l ? ", " : "") + t.levels[l].name + " " +
           std::to_string(snap->DomainRooms(l, {}).size());
  }
  return out;
}

void FillFinish(schema::Event::Body::Builder body, const std::string& ns, const std::string& name,
                const std::string& uid) {
  auto f = body.initWorkloadFinished();
  auto ref = f.initWorkload();
  ref.setNamespace(ns);
  ref.setName(name);
  ref.setUid(uid);
  f.setMessage("By test runner");
}

// Applies a set of input events as one logical instant and returns the decisions. Sequences
// advance past the decisions too, as the ledger would number them.
class Driver {
 public:
  explicit Driver(Engine* engine) : engine_(engine) {}

  uint64_t NextSequence() { return ++sequence_; }

  // REQUIRES: inputs were built with sequences from NextSequence, in order.
  std::vector<std::string> Apply(const std::vector<std::string>& inputs, int64_t now_ns,
                                 CpuMeter* decider, const std::string& where = "") {
    std::vector<schema::DecodedEvent> decoded;
    decoded.reserve(inputs.size());
    for (const std::string& bytes : inputs) {
      auto d = schema::DecodeEvent(bytes);
      if (!d.ok()) {
        Fail("input does not decode: " + d.status().ToString());
        continue;
      }
      decoded.push_back(std::move(d.value()));
    }
    Watchdog watchdog("EndBatch " + where + " (logical t=" +
                      std::to_string((now_ns - kStartNs) / kNsPerMs) + " ms, " +
                      std::to_string(inputs.size()) + " inputs)");
    if (decider != nullptr) decider->Start();
    for (const schema::DecodedEvent& e : decoded) engine_->ApplyInput(e.root());
    std::vector<std::string> out = engine_->EndBatch(sequence_, now_ns);
    if (decider != nullptr) decider->Stop();
    sequence_ += out.size();
    return out;
  }

 private:
  Engine* engine_;
  uint64_t sequence_ = 0;
};

// The body's union member, for counting decisions without reflection.
const char* DecisionName(schema::Event::Body::Which which) {
  using W = schema::Event::Body::Which;
  switch (which) {
    case W::QUOTA_RESERVED: return "quotaReserved";
    case W::ADMITTED: return "admitted";
    case W::PENDING_REASON_CHANGED: return "pendingReasonChanged";
    case W::EVICTION_STARTED: return "evictionStarted";
    case W::QUOTA_RELEASED: return "quotaReleased";
    case W::REQUEUED: return "requeued";
    case W::REJECTED: return "rejected";
    case W::DEACTIVATED: return "deactivated";
    case W::PREEMPTED: return "preempted";
    case W::STARVATION_ALERT: return "starvationAlert";
    case W::DRAIN_DEADLINE_PASSED: return "drainDeadlinePassed";
    default: return "notADecision";
  }
}

// ------------------------------------------------------------------------------------------
// Kueue's generator configuration (test/performance/scheduler/configs/*/generator.yaml).

struct Profile {
  std::string name;  // "baseline" from ".../baseline-generator.yaml"
  std::string path;
  std::vector<CohortClass> cohorts;
  std::optional<TasTopology> tas;  // the TAS profile's topology and flavor
};

std::optional<Profile> ParseProfile(const std::string& path, int divide) {
  Profile p;
  p.path = path;
  std::string base = path.substr(path.find_last_of('/') + 1);
  p.name = base.substr(0, base.find("-generator"));
  if (p.name.size() > 5 && p.name.substr(p.name.size() - 5) == ".yaml") {
    p.name = p.name.substr(0, p.name.size() - 5);
  }
  std::string error;
  auto cohorts = LoadKueueProfile(path, divide, &error);
  if (!cohorts) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), error.c_str());
    return std::nullopt;
  }
  p.cohorts = std::move(*cohorts);
  p.tas = LoadKueueTopology(path, &error);
  if (!error.empty()) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), error.c_str());
    return std::nullopt;
  }
  return p;
}

// Kueue's measured averages, from the comments of the profile's rangespec file
// ("Average value N" in baseline-rangespec.yaml, "mean=N" in large-scale-rangespec.yaml,
// "# MEAN / STDDEV / CV%" after the value in tas-rangespec.yaml).
struct KueueFigures {
  std::optional<double> usage_pct;                 // clusterQueueClassesMinUsage
  std::map<std::string, double> avg_admission_ms;  // wlClassesMaxAvgTimeToAdmissionMs
  std::optional<double> wall_ms;                   // cmd.maxWallMs
  std::string source;
};

KueueFigures ParseRangespec(const std::string& path) {
  KueueFigures k;
  std::ifstream in(path);
  if (!in) return k;
  static const std::regex kKey(R"(^\s+([A-Za-z][A-Za-z0-9_-]*):\s*[0-9_.]+\s*(#.*)?$)");
  static const std::regex kMean(R"((?:Average value|mean=)\s*([0-9]+(?:\.[0-9]+)?))");
  static const std::regex kSlash(R"(^#\s*([0-9]+(?:\.[0-9]+)?)\s*/\s*[0-9])");
  std::string section, comments, line;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != ' ' && line[0] != '#') {
      section = line.substr(0, line.find(':'));
      comments.clear();
      continue;
    }
    std::smatch m;
    if (std::regex_match(line, m, kKey)) {
      const std::string text = comments + " " + m[2].str();
      comments.clear();
      std::smatch mean;
      const std::string own = m[2].str();
      if (!std::regex_search(text, mean, kMean) && !std::regex_search(own, mean, kSlash)) {
        continue;
      }
      const double v = std::stod(mean[1].str());
      if (section == "clusterQueueClassesMinUsage") k.usage_pct = v;
      if (section == "wlClassesMaxAvgTimeToAdmissionMs") k.avg_admission_ms[m[1].str()] = v;
      if (section == "cmd" && m[1].str() == "maxWallMs") k.wall_ms = v;
      continue;
    }
    auto hash = line.find('#');
    if (hash != std::string::npos) comments += " " + line.substr(hash + 1);
  }
  if (k.usage_pct || !k.avg_admission_ms.empty()) k.source = path;
  return k;
}

// Used only when the rangespec file is missing or its comments no longer parse: the averages
// noted in /work/shared/kueue-perf/{baseline,large-scale}-rangespec.yaml (Kueue's
// test/performance/scheduler/configs).
KueueFigures HardCodedFigures(const std::string& profile) {
  KueueFigures k;
  if (profile == "baseline") {
    k.usage_pct = 55.9;
    k.avg_admission_ms = {{"large", 16501}, {"medium", 76768}, {"small", 215468}};
    k.wall_ms = 351116.4;
  } else if (profile == "large-scale") {
    k.usage_pct = 38.64;
    k.avg_admission_ms = {{"large", 105604}, {"medium", 256413}, {"small", 700379}};
    k.wall_ms = 1179411;
  } else {
    return k;
  }
  k.source = "hard-coded from " + profile + "-rangespec.yaml comments";
  return k;
}

// ------------------------------------------------------------------------------------------
// The profile simulation.

struct SimWorkload {
  WorkloadDef def;
  std::string key;  // namespace/name
  int class_idx = 0;
  int queue_idx = 0;
  int64_t creation_ms = 0;
  int64_t runtime_ms = 0;
  // Runtime state, as Kueue's runner and recorder see it.
  bool holds_quota = false;
  int64_t usage_milli = 0;      // from its QuotaReserved
  uint64_t running_generation = 0;  // admitted and running with this generation; 0: not running
  int64_t last_admission_ms = -1;
  uint32_t admissions = 0;
  uint32_t evictions = 0;
  bool finished = false;
  int64_t finished_ms = -1;
};

enum SimKind { kFinish = 0, kCreate = 1 };

struct SimEvent {
  int64_t t_ms;
  int kind;
  std::string key;
  size_t wl;
  uint64_t generation;  // for kFinish: the admission it ends
  bool operator>(const SimEvent& o) const {
    return std::tie(t_ms, kind, key) > std::tie(o.t_ms, o.kind, o.key);
  }
};

struct ClassStats {
  std::string name;
  int64_t count = 0;
  int64_t wait_ms_sum = 0;
  int64_t wait_ms_max = 0;
  int64_t never_admitted = 0;
  int64_t evictions = 0;
  int64_t readmissions = 0;
};

struct ProfileResult;
bool SameFigures(const ProfileResult& a, const ProfileResult& b);

struct ProfileResult {
  std::string name;
  std::vector<ClassStats> classes;
  double usage_pct = 0;
  int64_t makespan_ms = 0;
  int64_t workloads = 0;
  int64_t never_admitted = 0;
  double cpu_sim_s = 0;
  double cpu_decider_s = 0;
};

class ProfileRun {
 public:
  explicit ProfileRun(const Profile& p) : profile_(p), driver_(&engine_) {}

  ProfileResult Run();

 private:
  void Define();
  void DefineInputs();  // Define's inputs: the definitions, applied as one instant
  // What Run measures and counts over the whole simulation.
  struct Totals {
    CpuMeter decider, build, harness;
    int64_t first_event_ms = -1, prev_ms = -1;
    double used_milli_ms = 0;  // the integral of admitted cpu over time, mCPU x ms
    uint64_t instants = 0;
    int64_t slow_instants = 0;
    int64_t inputs_applied = 0;
    // Scratch, reused from instant to instant.
    std::vector<std::pair<int, size_t>> batch;  // (kind, workload)
    std::vector<std::string> inputs;
  };
  // Run's steps: one logical instant (false once the simulation must stop), the result, and
  // its report lines.
  bool Instant(Totals& t);
  ProfileResult Result(const Totals& t, int64_t* last_finish_ms, int64_t* nominal_milli);
  void Report(const ProfileResult& r, const Totals& t, int64_t last_finish_ms,
              int64_t nominal_milli, double cpu_setup, double wall_s);
  void ProcessDecisions(const std::vector<std::string>& decisions, int64_t now_ms,
                        std::set<int>* touched);
  // ProcessDecisions' steps.
  SimWorkload* Find(schema::WorkloadRef::Reader ref);
  void OnQuotaReserved(schema::QuotaReserved::Reader r, std::set<int>* touched);
  void OnQuotaReleased(schema::QuotaReleased::Reader r, int64_t now_ms, std::set<int>* touched);
  void CheckQuota(const std::set<int>& touched);

  const Profile& profile_;
  Engine engine_;
  Driver driver_;
  std::vector<QueueDef> queues_;
  std::map<std::string, std::vector<int>> cohort_queues_;
  std::vector<int64_t> queue_usage_milli_;  // from the decisions
  std::vector<SimWorkload> wls_;
  std::unordered_map<std::string, size_t> wl_index_;  // key -> index in wls_
  std::vector<std::string> class_names_;
  std::priority_queue<SimEvent, std::vector<SimEvent>, std::greater<SimEvent>> events_;
  std::map<std::string, int64_t> decision_counts_;
  int64_t total_usage_milli_ = 0;
  int64_t evictions_ = 0;
  int64_t preemptions_ = 0;
  int64_t stale_finishes_ = 0;
  int64_t decisions_ = 0;
};

void ProfileRun::Define() {
  for (const CohortClass& cc : profile_.cohorts) {
    for (int ci = 0; ci < cc.count; ++ci) {
      const std::string cohort = cc.class_name + "-" + std::to_string(ci);
      for (size_t qsi = 0; qsi < cc.queues_sets.size(); ++qsi) {
        const QueuesSet& qs = cc.queues_sets[qsi];
        for (int qi = 0; qi < qs.count; ++qi) {
          QueueDef q;
          q.name = qs.class_name + "-" + std::to_string(qsi) + "-" + std::to_string(qi) + "-" +
                   cohort;
          q.cohort = cohort;
          q.nominal_milli = qs.nominal_milli;
          q.borrowing_limit_milli = qs.borrowing_limit_milli;
          q.reclaim = qs.reclaim;
          q.within = qs.within;
          if (profile_.tas) q.flavor = profile_.tas->flavor;
          const int idx = static_cast<int>(queues_.size());
          cohort_queues_[cohort].push_back(idx);
          queues_.push_back(q);
          // Workloads: every set of every queue starts at t = 0; within a set, Kueue's
          // generator sleeps creationIntervalMs before each creation.
          for (size_t si = 0; si < qs.sets.size(); ++si) {
            const WorkloadsSet& ws = qs.sets[si];
            int64_t n = 0;
            for (int k = 0; k < ws.count; ++k) {
              for (size_t ti = 0; ti < ws.workloads.size(); ++ti) {
                const WorkloadTemplate& t = ws.workloads[ti];
                SimWorkload w;
                w.def.ns = q.name;
                w.def.name = t.class_name + "-" + std::to_string(si) + "-" + std::to_string(k) +
                             "-" + std::to_string(ti);
                w.key = w.def.ns + "/" + w.def.name;
                w.def.uid = UidOf(w.key);
                w.def.priority = t.priority;
                w.def.cpu_milli = t.request_milli;
                w.def.count = t.pod_count;
                w.def.tas_constraint = t.tas_constraint;
                w.def.tas_level = t.tas_level;
                w.def.slice_size = t.slice_size;
                w.creation_ms = (++n) * ws.interval_ms;
                w.def.creation_ns = kStartNs + w.creation_ms * kNsPerMs;
                w.runtime_ms = t.runtime_ms;
                w.queue_idx = idx;
                auto cls = std::find(class_names_.begin(), class_names_.end(), t.class_name);
                w.class_idx = static_cast<int>(cls - class_names_.begin());
                if (cls == class_names_.end()) class_names_.push_back(t.class_name);
                wls_.push_back(std::move(w));
              }
            }
          }
        }
      }
    }
  }
  std::set<std::string> uids;
  for (size_t i = 0; i < wls_.size(); ++i) {
    wl_index_[wls_[i].key] = i;
    if (!uids.insert(wls_[i].def.uid).second) Fail("uid collision for " + wls_[i].key);
    events_.push(SimEvent{wls_[i].creation_ms, kCreate, wls_[i].key, i, 0});
  }
  queue_usage_milli_.assign(queues_.size(), 0);
  DefineInputs();
}

void ProfileRun::DefineInputs() {
  // Definitions at t = 0, one instant: the flavor (the TAS profile: the TAS flavor, its
  // Topology and nodes), then every ClusterQueue and LocalQueue. Cohorts exist implicitly
  // through cohortName.
  std::vector<std::string> inputs;
  const size_t total =
      (profile_.tas ? 2 + static_cast<size_t>(TasNodes(*profile_.tas)) : 1) + 2 * queues_.size();
  auto add = [&](std::function<void(schema::Event::Body::Builder)> fill) {
    inputs.push_back(
        BuildEvent(driver_.NextSequence(), kStartNs, inputs.size() + 1 == total, fill));
  };
  if (profile_.tas) {
    AddTasDefinitions(*profile_.tas, add);
  } else {
    add([](schema::Event::Body::Builder b) { b.initFlavorDefined().setName("rf"); });
  }
  for (const QueueDef& q : queues_) add([&](auto b) { FillClusterQueue(b, q); });
  for (const QueueDef& q : queues_) add([&](auto b) { FillLocalQueue(b, q); });
  std::vector<std::string> out = driver_.Apply(inputs, kStartNs, nullptr);
  if (!out.empty()) Fail("definitions produced " + std::to_string(out.size()) + " decisions");
  if (profile_.tas) {
    Line(profile_.name + ".topology",
         Int(TasNodes(*profile_.tas)) + " nodes; domains per level: " +
             TasDomains(engine_, *profile_.tas) +
             " (Kueue keys a leaf by its hostname label, which its generator repeats per rack)");
  }
}

void ProfileRun::ProcessDecisions(const std::vector<std::string>& decisions, int64_t now_ms,
                                  std::set<int>* touched) {
  using W = schema::Event::Body::Which;
  for (const std::string& bytes : decisions) {
    auto decoded = schema::DecodeEvent(bytes);
    if (!decoded.ok()) {
      Fail("decision does not decode: " + decoded.status().ToString());
      continue;
    }
    schema::Event::Reader e = decoded->root();
    auto body = e.getBody();
    ++decisions_;
    ++decision_counts_[DecisionName(body.which())];
    if (!schema::IsDecision(body.which())) {
      Fail("EndBatch returned an input event");
      continue;
    }
    if (e.getRecordedAtNs() != kStartNs + now_ms * kNsPerMs) Fail("decision time is not now");
    switch (body.which()) {
      case W::QUOTA_RESERVED:
        OnQuotaReserved(body.getQuotaReserved(), touched);
        break;
      case W::ADMITTED: {
        auto a = body.getAdmitted();
        SimWorkload* w = Find(a.getWorkload());
        if (w == nullptr) break;
        if (!w->holds_quota) Fail("Admitted without QuotaReserved: " + w->key);
        if (w->running_generation != 0) Fail("Admitted twice: " + w->key);
        // Kueue's runner: the runtime starts (again, in full) at each admission; the recorder
        // keeps the last admission time.
        w->running_generation = a.getGeneration();
        w->last_admission_ms = now_ms;
        ++w->admissions;
        events_.push(SimEvent{now_ms + w->runtime_ms, kFinish, w->key,
                              static_cast<size_t>(w - wls_.data()), w->running_generation});
        break;
      }
      case W::EVICTION_STARTED: {
        SimWorkload* w = Find(body.getEvictionStarted().getWorkload());
        if (w == nullptr) break;
        ++evictions_;
        ++w->evictions;
        w->running_generation = 0;  // its pending finish is stale
        break;
      }
      case W::PREEMPTED:
        ++preemptions_;
        break;
      case W::QUOTA_RELEASED:
        OnQuotaReleased(body.getQuotaReleased(), now_ms, touched);
        break;
      case W::REJECTED: {
        auto r = body.getRejected();
        Fail(std::string("Rejected ") + r.getWorkload().getName().cStr() + ": " +
             r.getReason().cStr() + " " + r.getMessage().cStr());
        break;
      }
      default:
        break;
    }
  }
}

SimWorkload* ProfileRun::Find(schema::WorkloadRef::Reader ref) {
  auto it = wl_index_.find(std::string(ref.getNamespace().cStr()) + "/" + ref.getName().cStr());
  if (it == wl_index_.end()) {
    Fail(std::string("decision names an unknown workload ") + ref.getName().cStr());
    return nullptr;
  }
  return &wls_[it->second];
}

// The reservation is the workload's own, in its ClusterQueue, with its cpu.
void ProfileRun::OnQuotaReserved(schema::QuotaReserved::Reader r, std::set<int>* touched) {
  SimWorkload* w = Find(r.getWorkload());
  if (w == nullptr) return;
  if (w->holds_quota || w->finished) Fail("QuotaReserved for " + w->key + " holding quota");
  if (r.getAdmission().getClusterQueue() != queues_[static_cast<size_t>(w->queue_idx)].name) {
    Fail("QuotaReserved for " + w->key + " in another ClusterQueue");
  }
  int64_t cpu = 0;
  for (auto psa : r.getAdmission().getPodSetAssignments()) {
    for (auto u : psa.getResourceUsage()) {
      if (u.getName() == "cpu") cpu += u.getMilli();
    }
  }
  if (cpu != w->def.cpu_milli * w->def.count) {
    Fail("QuotaReserved for " + w->key + " with other usage");
  }
  w->holds_quota = true;
  w->usage_milli = cpu;
  queue_usage_milli_[static_cast<size_t>(w->queue_idx)] += cpu;
  total_usage_milli_ += cpu;
  touched->insert(w->queue_idx);
}

// The release ends what the workload held; with reason Finished, the workload itself.
void ProfileRun::OnQuotaReleased(schema::QuotaReleased::Reader r, int64_t now_ms,
                                 std::set<int>* touched) {
  SimWorkload* w = Find(r.getWorkload());
  if (w == nullptr) return;
  if (!w->holds_quota) {
    Fail("QuotaReleased for " + w->key + " holding none");
    return;
  }
  w->holds_quota = false;
  w->running_generation = 0;
  queue_usage_milli_[static_cast<size_t>(w->queue_idx)] -= w->usage_milli;
  total_usage_milli_ -= w->usage_milli;
  touched->insert(w->queue_idx);
  if (r.getReason() == "Finished") {
    w->finished = true;
    w->finished_ms = now_ms;
  }
}

// Usage never exceeds what quota allows: a ClusterQueue's nominal + borrowingLimit, a cohort's
// sum of nominal quotas. The engine's read model agrees with what the decisions say.
void ProfileRun::CheckQuota(const std::set<int>& touched) {
  std::set<std::string> cohorts;
  for (int qi : touched) {
    const QueueDef& q = queues_[static_cast<size_t>(qi)];
    const int64_t used = queue_usage_milli_[static_cast<size_t>(qi)];
    if (used < 0) Fail("usage of " + q.name + " below zero");
    if (q.borrowing_limit_milli && used > q.nominal_milli + *q.borrowing_limit_milli) {
      Fail("usage of " + q.name + " above nominal + borrowingLimit: " + Int(used));
    }
    int64_t engine_used = 0;
    auto it = engine_.cluster_queues().find(q.name);
    if (it != engine_.cluster_queues().end()) {
      for (const auto& [fr, v] : it->second.usage) engine_used += v;
    }
    if (engine_used != used) {
      Fail("engine usage of " + q.name + " is " + Int(engine_used) + ", decisions say " +
           Int(used));
    }
    cohorts.insert(q.cohort);
  }
  for (const std::string& c : cohorts) {
    int64_t used = 0, nominal = 0;
    for (int qi : cohort_queues_[c]) {
      used += queue_usage_milli_[static_cast<size_t>(qi)];
      nominal += queues_[static_cast<size_t>(qi)].nominal_milli;
    }
    if (used > nominal) Fail("usage of cohort " + c + " above its quota: " + Int(used));
  }
}

ProfileResult ProfileRun::Run() {
  const double cpu_begin = CpuSeconds();
  const double wall_begin = WallSeconds();
  Define();
  const double cpu_setup = CpuSeconds() - cpu_begin;

  Totals t;
  t.harness.Start();
  // One logical instant at a time, until no event is left or the simulation must stop.
  while (!events_.empty()) {
    if (!Instant(t)) break;
  }
  t.harness.Stop();
  const double wall_s = WallSeconds() - wall_begin;

  int64_t last_finish_ms = -1;
  int64_t nominal_milli = 0;
  ProfileResult r = Result(t, &last_finish_ms, &nominal_milli);
  r.cpu_decider_s = t.decider.seconds();
  r.cpu_sim_s = t.harness.seconds() - t.build.seconds();
  Report(r, t, last_finish_ms, nominal_milli, cpu_setup, wall_s);
  return r;
}

bool ProfileRun::Instant(Totals& t) {
  std::vector<std::pair<int, size_t>>& batch = t.batch;
  std::vector<std::string>& inputs = t.inputs;
  const int64_t now_ms = events_.top().t_ms;
  if (++t.instants > kInstantsMax || now_ms > kLogicalMsMax) {
    Fail("simulation does not end (instant " + std::to_string(t.instants) + ", t=" +
         Int(now_ms) + " ms)");
    return false;
  }
  batch.clear();
  while (!events_.empty() && events_.top().t_ms == now_ms) {
    const SimEvent& ev = events_.top();
    const SimWorkload& w = wls_[ev.wl];
    // A finish is stale when the admission it ends was evicted since.
    if (ev.kind == kCreate || (w.running_generation == ev.generation && !w.finished)) {
      batch.emplace_back(ev.kind, ev.wl);
    } else {
      ++stale_finishes_;
    }
    events_.pop();
  }
  if (batch.empty()) return true;
  // Admitted usage is a step function: it held its level since the previous instant.
  if (t.prev_ms >= 0) {
    t.used_milli_ms +=
        static_cast<double>(total_usage_milli_) * static_cast<double>(now_ms - t.prev_ms);
  }
  t.prev_ms = now_ms;
  if (t.first_event_ms < 0) t.first_event_ms = now_ms;

  const int64_t now_ns = kStartNs + now_ms * kNsPerMs;
  t.build.Start();
  inputs.clear();
  for (size_t i = 0; i < batch.size(); ++i) {
    const SimWorkload& w = wls_[batch[i].second];
    const bool last = i + 1 == batch.size();
    if (batch[i].first == kCreate) {
      inputs.push_back(BuildEvent(driver_.NextSequence(), now_ns, last,
                                  [&](auto b) { FillSubmit(b, w.def); }));
    } else {
      inputs.push_back(BuildEvent(driver_.NextSequence(), now_ns, last, [&](auto b) {
        FillFinish(b, w.def.ns, w.def.name, w.def.uid);
      }));
    }
  }
  t.build.Stop();
  t.inputs_applied += static_cast<int64_t>(inputs.size());
  const double decider_before = t.decider.seconds();
  std::vector<std::string> decisions =
      driver_.Apply(inputs, now_ns, &t.decider, "of profile " + profile_.name);
  const double instant_cpu_s = t.decider.seconds() - decider_before;
  if (instant_cpu_s > kSlowInstantCpuSeconds) {
    ++t.slow_instants;
    if (t.slow_instants <= kSlowInstantsPrintedMax) {
      Line(profile_.name + ".slow_instant",
           "t=" + Int(now_ms) + " ms: " + Int(static_cast<int64_t>(inputs.size())) + " inputs, " +
               Int(static_cast<int64_t>(decisions.size())) + " decisions, " +
               Fixed(instant_cpu_s, 2) + " CPU s in ApplyInput + EndBatch");
    }
  }
  std::set<int> touched;
  ProcessDecisions(decisions, now_ms, &touched);
  for (const auto& [kind, idx] : batch) {
    if (kind == kFinish && !wls_[idx].finished) {
      Fail("finish of " + wls_[idx].key + " released no quota");
    }
  }
  CheckQuota(touched);
  return true;
}

ProfileResult ProfileRun::Result(const Totals& t, int64_t* last_finish_ms,
                                 int64_t* nominal_milli) {
  ProfileResult r;
  r.name = profile_.name;
  r.workloads = static_cast<int64_t>(wls_.size());
  for (const std::string& c : class_names_) r.classes.push_back(ClassStats{c});
  *last_finish_ms = -1;
  for (const SimWorkload& w : wls_) {
    ClassStats& c = r.classes[static_cast<size_t>(w.class_idx)];
    ++c.count;
    c.evictions += w.evictions;
    if (w.admissions > 1) c.readmissions += w.admissions - 1;
    if (w.last_admission_ms < 0) {
      ++c.never_admitted;
      ++r.never_admitted;
    } else {
      const int64_t wait = w.last_admission_ms - w.creation_ms;
      c.wait_ms_sum += wait;
      c.wait_ms_max = std::max(c.wait_ms_max, wait);
    }
    if (!w.finished) Fail("workload " + w.key + " never finished");
    *last_finish_ms = std::max(*last_finish_ms, w.finished_ms);
  }
  *nominal_milli = 0;
  for (const QueueDef& q : queues_) *nominal_milli += q.nominal_milli;
  // Kueue's checker: cpuUsed * 100 / (nominalQuota * (lastEventTime - firstEventTime)), the
  // event times being the first creation and the last finish.
  const int64_t span_ms = *last_finish_ms - t.first_event_ms;
  const double quota_ms = static_cast<double>(*nominal_milli) * static_cast<double>(span_ms);
  r.usage_pct = span_ms > 0 ? t.used_milli_ms * 100.0 / quota_ms : 0;
  r.makespan_ms = *last_finish_ms;
  if (total_usage_milli_ != 0) Fail("usage left after the last finish: " + Int(total_usage_milli_));
  for (const auto& [key, w] : engine_.workloads()) {
    if (w.phase != projections::Phase::kFinished) {
      Fail("engine: " + key + " ends in phase " + projections::PhaseName(w.phase));
      break;
    }
  }
  if (static_cast<uint64_t>(decisions_) != engine_.decisions_made()) {
    Fail("decisions returned " + Int(decisions_) + " != engine count " +
         Int(static_cast<int64_t>(engine_.decisions_made())));
  }
  return r;
}

void ProfileRun::Report(const ProfileResult& r, const Totals& t, int64_t last_finish_ms,
                        int64_t nominal_milli, double cpu_setup, double wall_s) {
  const std::string p = r.name + ".";
  Line(p + "workloads", Int(r.workloads), "(" + Int(static_cast<int64_t>(queues_.size())) +
                                              " ClusterQueues, " +
                                              Int(static_cast<int64_t>(cohort_queues_.size())) +
                                              " cohorts)");
  Line(p + "instants", Int(static_cast<int64_t>(t.instants)),
       "logical instants (one EndBatch each; " + Int(t.slow_instants) + " took over " +
           Fixed(kSlowInstantCpuSeconds, 1) + " CPU s)");
  Line(p + "inputs", Int(t.inputs_applied), "(workloadSubmitted + workloadFinished)");
  Line(p + "decisions", Int(decisions_));
  std::string kinds;
  for (const auto& [name, n] : decision_counts_) kinds += " " + name + "=" + Int(n);
  Line(p + "decisions.by_kind", kinds.substr(kinds.empty() ? 0 : 1));
  Line(p + "evictions", Int(evictions_), "(evictionStarted; preempted: " + Int(preemptions_) +
                                             "; stale finishes ignored: " + Int(stale_finishes_) +
                                             ")");
  Line(p + "makespan_ms", Int(r.makespan_ms),
       "logical (first creation at " + Int(t.first_event_ms) + " ms, last finish at " +
           Int(last_finish_ms) + " ms)");
  Line(p + "never_admitted", Int(r.never_admitted));
  for (const ClassStats& c : r.classes) {
    Line(p + c.name + ".avg_time_to_admission_ms", Int(c.count > 0 ? c.wait_ms_sum / c.count : 0),
         "(" + Int(c.count) + " workloads, max " + Int(c.wait_ms_max) + " ms, never admitted " +
             Int(c.never_admitted) + ", evictions " + Int(c.evictions) + ", re-admissions " +
             Int(c.readmissions) + ")");
  }
  const double span_s = static_cast<double>(last_finish_ms - t.first_event_ms) / 1000.0;
  Line(p + "cq_usage_pct", Fixed(r.usage_pct, 2),
       "(" + Fixed(t.used_milli_ms / 1e6, 1) + " cpu-s used / (" +
           Fixed(nominal_milli / 1000.0, 0) + " cpu nominal x " + Fixed(span_s, 3) + " s))");
  Line(p + "cpu.setup_s", Fixed(cpu_setup, 3),
       "(definitions + workload table; YAML parsed before: see cpu.parse_s)");
  Line(p + "cpu.event_building_s", Fixed(t.build.seconds(), 3),
       "(capnp build + canonicalize of the inputs, during the simulation)");
  Line(p + "cpu.simulation_s", Fixed(r.cpu_sim_s, 3),
       "(simulation without event building: input decode, decider, decision decode, checks)");
  Line(p + "cpu.decider_s", Fixed(r.cpu_decider_s, 3), "(ApplyInput + EndBatch only)");
  Line(p + "cpu.simulation_with_building_s", Fixed(t.harness.seconds(), 3));
  Line(p + "decisions_per_cpu_s",
       Fixed(static_cast<double>(decisions_) / std::max(1e-9, r.cpu_decider_s), 0),
       "(decider CPU; " +
           Fixed(static_cast<double>(decisions_) / std::max(1e-9, r.cpu_sim_s), 0) +
           " per simulation CPU second)");
  Line(p + "wall_s", Fixed(wall_s, 3), "(setup + simulation)");
  Line(p + "peak_rss_mib", Mib(VmHwmKib()),
       "(VmHWM since this profile started; process ru_maxrss " + Mib(MaxRssKib()) + " MiB)");
}

void PrintComparison(const ProfileResult& r, const KueueFigures& k, double cpu_parse_s,
                     bool quick) {
  const std::string p = r.name + ".";
  Line(p + "kueue.source", k.source.empty() ? "none" : k.source);
  std::printf("\n  %-32s %14s %14s   %s\n", ("figure (" + r.name + ")").c_str(), "ours",
              "kueue", "goal: at least as good as Kueue");
  bool all_met = true;
  auto row = [&](const std::string& what, const std::string& ours, std::optional<double> kueue,
                 int digits, std::optional<bool> met, const std::string& goal) {
    std::printf("  %-32s %14s %14s   %s%s\n", what.c_str(), ours.c_str(),
                kueue ? Fixed(*kueue, digits).c_str() : "n/a", goal.c_str(),
                !met ? "" : (*met ? ": met" : ": NOT met"));
    if (met && !*met) all_met = false;
  };
  std::optional<bool> usage_met;
  if (k.usage_pct) usage_met = r.usage_pct >= *k.usage_pct;
  row("ClusterQueue usage %", Fixed(r.usage_pct, 2), k.usage_pct, 2, usage_met, ">= kueue");
  // Kueue prints the largest class first in its rangespec; keep that order.
  std::vector<const ClassStats*> order;
  for (const ClassStats& c : r.classes) order.push_back(&c);
  std::reverse(order.begin(), order.end());
  for (const ClassStats* c : order) {
    const int64_t avg = c->count > 0 ? c->wait_ms_sum / c->count : 0;
    std::optional<double> kv;
    if (auto it = k.avg_admission_ms.find(c->name); it != k.avg_admission_ms.end()) kv = it->second;
    std::optional<bool> met;
    if (kv) met = static_cast<double>(avg) <= *kv;
    row(c->name + " avg time to admission ms", Int(avg), kv, 0, met, "<= kueue");
  }
  row("never admitted", Int(r.never_admitted), 0.0, 0, r.never_admitted == 0, "== 0");
  if (r.name == "large-scale") {
    row("simulation CPU s", Fixed(r.cpu_sim_s, 3), std::nullopt, 0,
        quick ? std::optional<bool>()
              : std::optional<bool>(r.cpu_sim_s < kLargeScaleCpuGoalSeconds),
        "< 5 s" + std::string(quick ? " (not judged in --quick)" : ""));
    row("decider CPU s", Fixed(r.cpu_decider_s, 3), std::nullopt, 0, std::nullopt,
        "(ApplyInput + EndBatch only)");
  } else {
    row("simulation CPU s", Fixed(r.cpu_sim_s, 3), std::nullopt, 0, std::nullopt, "");
    row("decider CPU s", Fixed(r.cpu_decider_s, 3), std::nullopt, 0, std::nullopt,
        "(ApplyInput + EndBatch only)");
  }
  row("makespan ms", Int(r.makespan_ms), k.wall_ms, 0, std::nullopt,
      "(ours: logical; kueue: wall time of its whole run)");
  std::printf("  (YAML parse: %.3f CPU s, excluded above)\n\n", cpu_parse_s);
  Line(p + "goals", all_met ? "all met" : "NOT all met",
       quick ? "(--quick: scaled-down counts, figures not comparable to Kueue's)" : "");
}

// ------------------------------------------------------------------------------------------
// Scaling: the cost of a decision with N pending workloads that cannot fit.

struct ScalingParams {
  int queues = 10;               // ClusterQueues in the one cohort
  int64_t nominal_milli = 10'000;
  int64_t filler_milli = 9'000;  // admitted first, leaves 1 cpu free per ClusterQueue
  int64_t backlog_milli = 5'000; // cannot fit in the 1 cpu left
  int backlog_priorities = 5;    // backlog classes per ClusterQueue
  int64_t probe_milli = 1'000;   // fits in the 1 cpu left
  int cycles = 2'000;            // submit + finish of one probe workload each, per round
  int rounds = 15;               // interleaved between the sizes; the best round counts
  size_t batch_inputs = 256;     // backlog submissions per instant
  // The TAS variant: the TAS profile's flavor, Topology and nodes; every workload requires one
  // domain of the level above the nodes, the backlog's and probes' in 2 pods of half the cpu.
  std::optional<TasTopology> tas;
};

int64_t VmRssKib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoll(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

// One cohort of `queues` ClusterQueues (borrowingLimit 0: each keeps to its nominal quota, yet
// every release re-activates the whole cohort). Each ClusterQueue holds a filler that leaves
// 1 cpu free and a share of the N backlog workloads (5 cpu: never fit while the filler runs).
// The measured load submits a 1 cpu probe (admitted), then finishes it: the release
// re-activates every backlog class of the cohort, whose heads are nominated, fail and go back
// to inadmissible. So every cycle consults the backlog.
class ScalingRun {
 public:
  ScalingRun(int64_t pending, const ScalingParams& sp)
      : pending_(pending), sp_(sp), driver_(&engine_) {}

  // Defines the queues, admits the fillers and submits the backlog.
  void Setup();
  // Runs sp.cycles probe cycles; returns the decider CPU seconds per decision.
  double MeasureRound();

  int64_t pending() const { return pending_; }
  double setup_cpu_s() const { return setup_cpu_s_; }
  int64_t setup_rss_kib() const { return setup_rss_kib_; }
  int64_t decisions_per_round() const { return decisions_per_round_; }
  const std::vector<double>& per_decision_s() const { return per_decision_s_; }

 private:
  std::vector<std::string> Flush(CpuMeter* meter) {
    if (inputs_.empty()) return {};
    std::vector<std::string> out = driver_.Apply(inputs_, kStartNs + now_ms_ * kNsPerMs, meter,
                                                 "of scaling N=" + Int(pending_));
    inputs_.clear();
    ++now_ms_;
    return out;
  }
  void Submit(const std::string& q, const std::string& name, int32_t priority, int64_t milli,
              int32_t pods = 1) {
    WorkloadDef w{q, name, UidOf(q + "/" + name), priority, milli, kStartNs + now_ms_ * kNsPerMs};
    if (sp_.tas) {
      w.count = pods;
      w.cpu_milli = milli / pods;
      w.tas_constraint = "required";
      w.tas_level = sp_.tas->levels[sp_.tas->levels.size() - 2].node_label;
    }
    inputs_.push_back(BuildEvent(driver_.NextSequence(), kStartNs + now_ms_ * kNsPerMs, false,
                                 [&](auto b) { FillSubmit(b, w); }));
  }
  // Decodes every decision (a failure is a decider bug) and counts those of one kind.
  static int64_t Count(const std::vector<std::string>& out, schema::Event::Body::Which which) {
    int64_t n = 0;
    for (const std::string& bytes : out) {
      auto d = schema::DecodeEvent(bytes);
      if (!d.ok()) {
        Fail("scaling: decision does not decode: " + d.status().ToString());
        continue;
      }
      if (d->root().getBody().which() == which) ++n;
    }
    return n;
  }

  const int64_t pending_;
  const ScalingParams sp_;
  Engine engine_;
  Driver driver_;
  std::vector<QueueDef> queues_;
  std::vector<std::string> inputs_;
  int64_t now_ms_ = 0;
  int64_t probe_ = 0;
  double setup_cpu_s_ = 0;
  int64_t setup_rss_kib_ = 0;
  int64_t decisions_per_round_ = 0;
  std::vector<double> per_decision_s_;
};

void ScalingRun::Setup() {
  const double begin = CpuSeconds();
  const int64_t rss_begin = VmRssKib();
  for (int i = 0; i < sp_.queues; ++i) {
    QueueDef q;
    q.name = "scale-" + std::to_string(i);
    q.cohort = "scale";
    q.nominal_milli = sp_.nominal_milli;
    q.borrowing_limit_milli = 0;
    if (sp_.tas) q.flavor = sp_.tas->flavor;
    queues_.push_back(q);
  }
  const int64_t now_ns = kStartNs;
  auto add = [&](std::function<void(schema::Event::Body::Builder)> fill) {
    inputs_.push_back(BuildEvent(driver_.NextSequence(), now_ns, false, fill));
  };
  if (sp_.tas) {
    AddTasDefinitions(*sp_.tas, add);
  } else {
    add([](schema::Event::Body::Builder b) { b.initFlavorDefined().setName("rf"); });
  }
  for (const QueueDef& q : queues_) {
    inputs_.push_back(BuildEvent(driver_.NextSequence(), now_ns, false,
                                 [&](auto b) { FillClusterQueue(b, q); }));
    inputs_.push_back(BuildEvent(driver_.NextSequence(), now_ns, false,
                                 [&](auto b) { FillLocalQueue(b, q); }));
  }
  for (const QueueDef& q : queues_) Submit(q.name, "filler", 100, sp_.filler_milli);
  if (Count(Flush(nullptr), schema::Event::Body::ADMITTED) != sp_.queues) {
    Fail("scaling: the fillers were not all admitted");
  }
  for (int64_t i = 0; i < pending_; ++i) {
    const QueueDef& q = queues_[static_cast<size_t>(i % sp_.queues)];
    Submit(q.name, "backlog-" + std::to_string(i), static_cast<int32_t>(i % sp_.backlog_priorities),
           sp_.backlog_milli, 2);
    if (inputs_.size() == sp_.batch_inputs &&
        Count(Flush(nullptr), schema::Event::Body::QUOTA_RESERVED) != 0) {
      Fail("scaling: a backlog workload was admitted");
    }
  }
  if (Count(Flush(nullptr), schema::Event::Body::QUOTA_RESERVED) != 0) {
    Fail("scaling: a backlog workload was admitted");
  }
  size_t pending_now = 0;
  for (const auto& [name, cq] : engine_.cluster_queues()) pending_now += cq.pending;
  if (static_cast<int64_t>(pending_now) != pending_) {
    Fail("scaling: " + std::to_string(pending_now) + " pending, expected " + Int(pending_));
  }
  setup_cpu_s_ = CpuSeconds() - begin;
  setup_rss_kib_ = VmRssKib() - rss_begin;
}

double ScalingRun::MeasureRound() {
  // The meter covers ApplyInput + EndBatch only: inputs are built and decisions decoded (to
  // check them) outside it.
  CpuMeter meter;
  int64_t decisions = 0, admitted = 0, released = 0;
  for (int c = 0; c < sp_.cycles; ++c) {
    const QueueDef& q = queues_[static_cast<size_t>(c % sp_.queues)];
    const std::string name = "probe-" + std::to_string(probe_++);
    Submit(q.name, name, 1000, sp_.probe_milli, 2);
    std::vector<std::string> out = Flush(&meter);
    decisions += static_cast<int64_t>(out.size());
    admitted += Count(out, schema::Event::Body::ADMITTED);
    const std::string uid = UidOf(q.name + "/" + name);
    inputs_.push_back(BuildEvent(driver_.NextSequence(), kStartNs + now_ms_ * kNsPerMs, false,
                                 [&](auto b) { FillFinish(b, q.name, name, uid); }));
    out = Flush(&meter);
    decisions += static_cast<int64_t>(out.size());
    released += Count(out, schema::Event::Body::QUOTA_RELEASED);
    if (Count(out, schema::Event::Body::QUOTA_RESERVED) != 0) {
      Fail("scaling: a backlog workload was admitted after a release");
    }
  }
  if (admitted != sp_.cycles || released != sp_.cycles) {
    Fail("scaling: " + Int(admitted) + " probes admitted and " + Int(released) + " released of " +
         Int(sp_.cycles));
  }
  decisions_per_round_ = decisions;
  const double per_decision =
      meter.seconds() / static_cast<double>(std::max<int64_t>(1, decisions));
  per_decision_s_.push_back(per_decision);
  return per_decision;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Min(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}

// Both engines are set up first, then measured in interleaved rounds (order rotated per round),
// so that the load of this shared machine falls on both alike.
int RunScalingPhase(const std::vector<int64_t>& sizes, const ScalingParams& sp,
                    const std::string& prefix) {
  std::vector<std::unique_ptr<ScalingRun>> runs;
  for (int64_t n : sizes) {
    runs.push_back(std::make_unique<ScalingRun>(n, sp));
    runs.back()->Setup();
    const std::string p = prefix + ".n" + Int(n) + ".";
    Line(p + "setup_cpu_s", Fixed(runs.back()->setup_cpu_s(), 3), "(submitting the backlog)");
    Line(p + "rss_growth_mib", Mib(runs.back()->setup_rss_kib()),
         "(resident memory added by the setup: definitions, fillers, backlog)");
  }
  for (int round = 0; round < sp.rounds; ++round) {
    for (size_t i = 0; i < runs.size(); ++i) {
      runs[(i + static_cast<size_t>(round)) % runs.size()]->MeasureRound();
    }
  }
  for (const auto& run : runs) {
    const std::string p = prefix + ".n" + Int(run->pending()) + ".";
    std::string rounds;
    for (double v : run->per_decision_s()) rounds += " " + Fixed(v * 1e6, 2);
    Line(p + "cpu_per_decision_us", Fixed(Min(run->per_decision_s()) * 1e6, 3),
         "(best round; median " + Fixed(Median(run->per_decision_s()) * 1e6, 3) + "; rounds:" +
             rounds + "; " + Int(run->decisions_per_round()) + " decisions per round)");
  }
  const ScalingRun& lo = *runs.front();
  const ScalingRun& hi = *runs.back();
  const double ratio = Min(hi.per_decision_s()) / std::max(1e-12, Min(lo.per_decision_s()));
  const double ratio_median =
      Median(hi.per_decision_s()) / std::max(1e-12, Median(lo.per_decision_s()));
  Line(prefix + ".ratio", Fixed(ratio, 3),
       "(CPU per decision with N=" + Int(hi.pending()) + " / with N=" + Int(lo.pending()) +
           ", best rounds; medians: " + Fixed(ratio_median, 3) +
           "; goal: does not grow, ratio <= 1.25 allowing for noise and log N: " +
           (ratio <= 1.25 ? "met" : "NOT met") + ")");
  return g_failures;
}

// ------------------------------------------------------------------------------------------

void PrintMachine() {
  struct utsname u {};
  ::uname(&u);
  Line("machine.nproc", Int(::sysconf(_SC_NPROCESSORS_ONLN)), "cores");
  Line("machine.kernel", std::string(u.sysname) + " " + u.release + " " + u.machine);
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      Line("machine.cpu", line.substr(line.find(':') + 2));
      break;
    }
  }
  std::ifstream loadavg("/proc/loadavg");
  std::getline(loadavg, line);
  Line("machine.loadavg", line);
}

// Everything but CPU time: repetitions of a profile must agree on it (the decider is pure).
bool SameFigures(const ProfileResult& a, const ProfileResult& b) {
  if (a.usage_pct != b.usage_pct || a.makespan_ms != b.makespan_ms ||
      a.workloads != b.workloads || a.never_admitted != b.never_admitted ||
      a.classes.size() != b.classes.size()) {
    return false;
  }
  for (size_t i = 0; i < a.classes.size(); ++i) {
    const ClassStats& x = a.classes[i];
    const ClassStats& y = b.classes[i];
    if (x.name != y.name || x.count != y.count || x.wait_ms_sum != y.wait_ms_sum ||
        x.wait_ms_max != y.wait_ms_max || x.never_admitted != y.never_admitted ||
        x.evictions != y.evictions || x.readmissions != y.readmissions) {
      return false;
    }
  }
  return true;
}

int Usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--quick] [--profile PATH]... [--phases profiles,scaling,tas]\n"
               "          [--divide D] [--scaling-n N1,N2] [--cycles C] [--watchdog-s S]\n"
               "          [--in-process] [--repeat R] [--tas-profile PATH]\n"
               "  --profile     a Kueue generator YAML (default: baseline and large-scale in\n"
               "                " DECIDER_BENCH_PROFILE_DIR ")\n"
               "  --quick       counts /10, scaling with N=1000 vs 10000 (CI smoke)\n"
               "  --phases      default profiles,scaling; tas: Kueue's TAS profile\n"
               "                (--tas-profile, default tas-generator.yaml beside the others),\n"
               "                then the scaling check on its topology with TAS requests\n"
               "  --divide      divide every workloadsSet count by D (at least 1 remains)\n"
               "  --scaling-n   pending backlog sizes compared (first vs last)\n"
               "  --cycles      probe cycles per scaling round\n"
               "  --watchdog-s  CPU seconds one EndBatch may take (default 300, quick 30)\n"
               "  --in-process  no child processes (for gdb, valgrind)\n"
               "  --repeat      runs of each profile (default 3, quick 1): the figures must be\n"
               "                the same; the CPU goal is judged on the fastest run\n",
               argv0);
  return 2;
}

// decider_bench's command line, with its defaults applied.
struct BenchArgs {
  bool quick = false;
  std::vector<std::string> profiles;
  std::string phases = "profiles,scaling";
  std::vector<int64_t> scaling_n;
  int cycles = 0;
  int divide = 0;
  bool in_process = false;
  double watchdog_s = 0;
  int repeat = 0;
  ScalingParams sp;
  std::string tas_profile = std::string(DECIDER_BENCH_PROFILE_DIR) + "/tas-generator.yaml";
};

// False on an unknown argument.
bool ParseBenchArgs(int argc, char** argv, BenchArgs* args) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--quick") {
      args->quick = true;
    } else if (a == "--profile") {
      args->profiles.push_back(next());
    } else if (a == "--tas-profile") {
      args->tas_profile = next();
    } else if (a == "--phases") {
      args->phases = next();
    } else if (a == "--scaling-n") {
      std::stringstream ss(next());
      std::string item;
      while (std::getline(ss, item, ',')) args->scaling_n.push_back(std::atoll(item.c_str()));
    } else if (a == "--cycles") {
      args->cycles = std::atoi(next().c_str());
    } else if (a == "--divide") {
      args->divide = std::atoi(next().c_str());
    } else if (a == "--in-process") {
      args->in_process = true;
    } else if (a == "--watchdog-s") {
      args->watchdog_s = std::atof(next().c_str());
    } else if (a == "--repeat") {
      args->repeat = std::atoi(next().c_str());
    } else {
      return false;
    }
  }
  if (args->profiles.empty()) {
    args->profiles = {std::string(DECIDER_BENCH_PROFILE_DIR) + "/baseline-generator.yaml",
                      std::string(DECIDER_BENCH_PROFILE_DIR) + "/large-scale-generator.yaml"};
  }
  if (args->divide == 0) args->divide = args->quick ? 10 : 1;
  if (args->repeat <= 0) args->repeat = args->quick ? 1 : 3;
  if (args->scaling_n.empty()) {
    args->scaling_n = args->quick ? std::vector<int64_t>{1'000, 10'000}
                                  : std::vector<int64_t>{10'000, 100'000};
  }
  if (args->quick) {
    args->sp.cycles = 200;
    args->sp.rounds = 7;
  }
  if (args->cycles > 0) args->sp.cycles = args->cycles;
  g_end_batch_cpu_seconds_max =
      args->watchdog_s > 0 ? args->watchdog_s : (args->quick ? 30 : 300);
  return true;
}

// Runs one profile `repeat` times (the figures must agree) and compares the fastest run with
// Kueue's figures; appends its line to *summary.
void RunProfile(const std::string& path, const BenchArgs& args,
                std::vector<std::string>* summary) {
  // The profiles live beside the checkout (../shared/kueue-perf), not in it: a checkout
  // without them skips the profiles and says so, the scaling check still runs.
  if (!std::filesystem::exists(path)) {
    std::printf("SKIP: profile %s not found (Kueue's perf profiles are read from "
                "../shared/kueue-perf beside the checkout, or --profile PATH)\n",
                path.c_str());
    summary->push_back("profile " + path + ": skipped (not found)");
    return;
  }
  ResetPeakRss();
  const double parse_begin = CpuSeconds();
  std::optional<Profile> profile = ParseProfile(path, args.divide);
  const double cpu_parse = CpuSeconds() - parse_begin;
  if (!profile) {
    Fail("cannot read profile " + path);
    return;
  }
  std::string rangespec = path;
  if (auto pos = rangespec.rfind("-generator.yaml"); pos != std::string::npos) {
    rangespec.replace(pos, std::string("-generator.yaml").size(), "-rangespec.yaml");
  }
  KueueFigures kueue = ParseRangespec(rangespec);
  if (!kueue.usage_pct || kueue.avg_admission_ms.empty()) {
    kueue = HardCodedFigures(profile->name);
  }
  std::printf("\n# profile %s (%s)\n", profile->name.c_str(), path.c_str());
  Line(profile->name + ".cpu.parse_s", Fixed(cpu_parse, 3), "(YAML)");
  const int failures = RunIsolated("profile " + profile->name, args.in_process, [&] {
    // CPU time on a shared machine moves by up to +-30 % between identical runs (other
    // tenants' load): the profile runs `repeat` times, every run must give the same
    // figures, and the CPU figures judged are the fastest run's (as for the scaling phase).
    std::optional<ProfileResult> best;
    std::string sims, deciders;
    for (int rep = 0; rep < args.repeat; ++rep) {
      g_quiet_lines = rep > 0;
      ProfileRun run(*profile);
      ProfileResult r = run.Run();
      g_quiet_lines = false;
      sims += (sims.empty() ? "" : " ") + Fixed(r.cpu_sim_s, 3);
      deciders += (deciders.empty() ? "" : " ") + Fixed(r.cpu_decider_s, 3);
      if (best && !SameFigures(*best, r)) {
        Fail("run " + Int(rep + 1) + " of " + profile->name +
             " gave other figures than run 1: the decider is not deterministic");
      }
      if (!best || r.cpu_sim_s < best->cpu_sim_s) best = std::move(r);
    }
    if (args.repeat > 1) {
      Line(profile->name + ".cpu.runs.simulation_s", sims,
           "(every run; the table uses the fastest)");
      Line(profile->name + ".cpu.runs.decider_s", deciders);
    }
    if (best->never_admitted > 0) Fail(Int(best->never_admitted) + " workloads never admitted");
    PrintComparison(*best, kueue, cpu_parse, args.quick || args.divide > 1);
    return g_failures;
  });
  if (!args.in_process) g_failures += failures;
  summary->push_back("profile " + profile->name + ": " + (failures == 0 ? "ok" : "FAILED"));
}

// The cost per decision against the number of pending workloads.
void RunScaling(const BenchArgs& args, const ScalingParams& sp, const std::string& prefix,
                std::vector<std::string>* summary) {
  std::printf("\n# %s: cost per decision against the number of pending workloads\n",
              prefix.c_str());
  if (sp.tas) {
    Line(prefix + ".topology",
         "the TAS profile's " + Int(TasNodes(*sp.tas)) + " nodes, flavor " + sp.tas->flavor +
             "; every workload requires one " + sp.tas->levels[sp.tas->levels.size() - 2].name +
             " (" + sp.tas->levels[sp.tas->levels.size() - 2].node_label +
             "), backlog and probes in 2 pods of half their cpu");
  }
  Line(prefix + ".setup",
       Int(sp.queues) + " ClusterQueues in one cohort, nominal " +
           Fixed(sp.nominal_milli / 1000.0, 0) + " cpu, borrowingLimit 0; filler " +
           Fixed(sp.filler_milli / 1000.0, 0) + " cpu admitted in each; N backlog workloads of " +
           Fixed(sp.backlog_milli / 1000.0, 0) + " cpu (" + Int(sp.backlog_priorities) +
           " priorities) pending");
  Line(prefix + ".load", Int(sp.cycles) + " cycles of submit + finish of a " +
                           Fixed(sp.probe_milli / 1000.0, 0) +
                           " cpu probe (each release re-nominates the backlog heads), " +
                           Int(sp.rounds) + " rounds per N, interleaved");
  const int failures = RunIsolated(prefix, args.in_process,
                                   [&] { return RunScalingPhase(args.scaling_n, sp, prefix); });
  if (!args.in_process) g_failures += failures;
  summary->push_back(prefix + ": " + (failures == 0 ? "ok" : "FAILED"));
}

// The TAS phase: Kueue's TAS profile (tas-generator.yaml), then the scaling check on its
// topology with TAS requests.
void RunTas(const BenchArgs& args, std::vector<std::string>* summary) {
  RunProfile(args.tas_profile, args, summary);
  std::string error;
  ScalingParams sp = args.sp;
  if (std::filesystem::exists(args.tas_profile)) {
    sp.tas = LoadKueueTopology(args.tas_profile, &error);
  }
  if (!sp.tas) {
    std::printf("SKIP: TAS scaling: no topology in %s %s\n", args.tas_profile.c_str(),
                error.c_str());
    summary->push_back("scaling_tas: skipped (no topology)");
    return;
  }
  if (args.scaling_n.size() >= 2) RunScaling(args, sp, "scaling_tas", summary);
}

int Main(int argc, char** argv) {
  BenchArgs args;
  if (!ParseBenchArgs(argc, argv, &args)) return Usage(argv[0]);
  InstallWatchdogHandler();  // inherited by the children
  std::printf("decider_bench: %s\n", argv[0]);
  PrintMachine();
  Line("params.mode", args.quick ? "quick" : "full");
  Line("params.divide", Int(args.divide), "(workloadsSet counts divided by this, at least 1)");
  Line("params.repeat", Int(args.repeat),
       "(runs of each profile; the figures must agree; CPU figures and the CPU goal are the "
       "fastest run's, all runs' CPU printed)");
  Line("params.watchdog", Fixed(g_end_batch_cpu_seconds_max, 0),
       std::string("CPU seconds per EndBatch; ") +
           (args.in_process ? "in process"
                            : "each run in a child process with a 4 GiB address space"));
  std::vector<std::string> summary;

  if (args.phases.find("profiles") != std::string::npos) {
    for (const std::string& path : args.profiles) RunProfile(path, args, &summary);
  }
  if (args.phases.find("scaling") != std::string::npos && args.scaling_n.size() >= 2) {
    RunScaling(args, args.sp, "scaling", &summary);
  }
  std::stringstream phases(args.phases);
  for (std::string phase; std::getline(phases, phase, ',');) {
    if (phase == "tas") RunTas(args, &summary);
  }
  std::printf("\n");
  for (const std::string& line : summary) Line("summary", line);

  Line("failures", Int(g_failures));
  return g_failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace admission::bench

int main(int argc, char** argv) { return admission::bench::Main(argc, argv); }
