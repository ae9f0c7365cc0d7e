#include "bench/launcher/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "bench/launcher/launch_protocol.h"

extern char** environ;

namespace ringcc::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Child {
  pid_t pid = -1;
  int fd = -1;  // launcher's end of the control channel; -1 once closed
  bool exited = false;
  std::string inbuf;
  std::optional<CtrlMessage> pending;
};

bool parseNumber(const std::string& s, double lo, double& out) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || errno != 0 || !(v >= lo)) return false;
  out = v;
  return true;
}

void closeFd(Child& c) {
  if (c.fd >= 0) ::close(c.fd);
  c.fd = -1;
  c.pending.reset();
  c.inbuf.clear();
}

// The environment a child starts with: ours, minus any stale RINGCC_* launch variables, plus
// its own.
std::vector<std::string> childEnvironment(const LaunchSpec& spec, int rank, int ctrlFd) {
  std::vector<std::string> env;
  const char* ours[] = {kEnvRank, kEnvNranks, kEnvLocalRank, kEnvLocalSize, kEnvUniqueId,
                        kEnvCtrlFd};
  for (char** e = environ; *e; ++e) {
    bool stale = false;
    for (const char* name : ours) {
      size_t len = std::strlen(name);
      if (std::strncmp(*e, name, len) == 0 && (*e)[len] == '=') stale = true;
    }
    if (!stale) env.push_back(*e);
  }
  env.push_back(std::string(kEnvRank) + "=" + std::to_string(rank));
  env.push_back(std::string(kEnvNranks) + "=" + std::to_string(spec.nprocs));
  env.push_back(std::string(kEnvLocalRank) + "=" + std::to_string(rank));
  env.push_back(std::string(kEnvLocalSize) + "=" + std::to_string(spec.nprocs));
  env.push_back(std::string(kEnvUniqueId) + "=" + spec.uniqueIdHex);
  env.push_back(std::string(kEnvCtrlFd) + "=" + std::to_string(ctrlFd));
  return env;
}

int statusCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

std::string launchUsage() {
  return "USAGE: ringcc-run [-n,--np N] [--timeout SECONDS] [--grace SECONDS]\n"
         "\t[--bind-to auto|core|none] [--] program [args...]\n"
         "\tStarts N processes of `program` on this host with RINGCC_RANK, RINGCC_NRANKS,\n"
         "\tRINGCC_LOCAL_RANK, RINGCC_LOCAL_SIZE, RINGCC_UNIQUE_ID and RINGCC_CTRL_FD set.\n"
         "\tReturns the first non-zero exit code; when one process fails the others are\n"
         "\tterminated (SIGTERM, then SIGKILL after --grace seconds, default 5).\n"
         "\t--timeout: bring everything down after SECONDS and exit 124 (default: none).\n"
         "\t--bind-to: core gives each process its own share of this process's cores, none\n"
         "\tleaves them unbound; auto (default) binds when there are no more processes than\n"
         "\tcores, as mpirun does.\n";
}

LaunchParse parseLaunchArgs(int argc, const char* const* argv, LaunchSpec& spec,
                            std::string& error) {
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.empty() || a[0] != '-') break;
    if (a == "-h" || a == "--help") return LaunchParse::Help;
    std::string value;
    std::string name = a;
    size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
    } else if (a.rfind("-n", 0) == 0 && a.size() > 2 && a[1] == 'n' && a.rfind("--", 0) != 0) {
      name = "-n";
      value = a.substr(2);
    } else {
      if (i + 1 >= argc) {
        error = "option " + a + " needs a value";
        return LaunchParse::Error;
      }
      value = argv[++i];
    }
    double v = 0;
    if (name == "-n" || name == "--np") {
      if (!parseNumber(value, 1, v) || v != static_cast<int>(v) || v > 4096) {
        error = "invalid process count '" + value + "' for -n (expected an integer >= 1)";
        return LaunchParse::Error;
      }
      spec.nprocs = static_cast<int>(v);
    } else if (name == "--timeout") {
      if (!parseNumber(value, 0, v)) {
        error = "invalid --timeout '" + value + "' (seconds >= 0)";
        return LaunchParse::Error;
      }
      spec.timeoutSec = v;
    } else if (name == "--grace") {
      if (!parseNumber(value, 0, v)) {
        error = "invalid --grace '" + value + "' (seconds >= 0)";
        return LaunchParse::Error;
      }
      spec.graceSec = v;
    } else if (name == "--bind-to") {
      if (!parseBindPolicy(value, spec.bind)) {
        error = "invalid --bind-to '" + value + "' (auto, core or none)";
        return LaunchParse::Error;
      }
    } else {
      error = "unknown option '" + a + "' (see -h)";
      return LaunchParse::Error;
    }
  }
  if (i >= argc) {
    error = "no program to run (see -h)";
    return LaunchParse::Error;
  }
  spec.argv.assign(argv + i, argv + argc);
  return LaunchParse::Run;
}

namespace {

// A control channel per child, a socket pair: the launcher's end in children[r].fd, the
// child's in childEnds[r]. False (all closed, saying why) if one cannot be made.
bool openChannels(std::vector<Child>& children, std::vector<int>& childEnds, FILE* err) {
  for (size_t r = 0; r < children.size(); ++r) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      std::fprintf(err, "ringcc-run: socketpair: %s\n", std::strerror(errno));
      for (size_t k = 0; k < r; ++k) {
        ::close(children[k].fd);
        ::close(childEnds[k]);
      }
      return false;
    }
    children[r].fd = sv[0];
    childEnds[r] = sv[1];
  }
  return true;
}

// Everything a child needs is built before fork: ncclGetUniqueId may have started threads in
// this process, so the child does only async-signal-safe work before exec.
struct ExecPlan {
  std::vector<std::vector<std::string>> envs;
  std::vector<std::vector<char*>> envps;  // into envs
  std::vector<char*> argv;
  std::vector<cpu_set_t> masks;  // each child's cores; empty: unbound
};

void planExec(const LaunchSpec& spec, const std::vector<int>& childEnds, ExecPlan* plan) {
  const int n = spec.nprocs;
  plan->envs.resize(n);
  plan->envps.resize(n);
  for (const std::string& a : spec.argv) plan->argv.push_back(const_cast<char*>(a.c_str()));
  plan->argv.push_back(nullptr);
  for (int r = 0; r < n; ++r) {
    plan->envs[r] = childEnvironment(spec, r, childEnds[r]);
    for (std::string& e : plan->envs[r]) plan->envps[r].push_back(e.data());
    plan->envps[r].push_back(nullptr);
  }
  // Each child's cores, as a mask built here: the child only hands it to sched_setaffinity.
  const std::vector<std::vector<int>> binding = planBinding(spec.bind, n, allowedCpus());
  plan->masks.resize(binding.size());
  for (size_t r = 0; r < binding.size(); ++r) {
    CPU_ZERO(&plan->masks[r]);
    for (int cpu : binding[r]) CPU_SET(cpu, &plan->masks[r]);
  }
}

// The forked child `r`: keeps only its own end of the control channels, takes its cores, and
// execs the program (or runs spec.childMain). Async-signal-safe work only, until exec.
[[noreturn]] void runChild(const LaunchSpec& spec, int r, const std::vector<Child>& children,
                           const std::vector<int>& childEnds, ExecPlan& plan) {
  for (size_t k = 0; k < children.size(); ++k) {
    if (children[k].fd >= 0) ::close(children[k].fd);
    if (static_cast<int>(k) != r && childEnds[k] >= 0) ::close(childEnds[k]);
  }
  ::fcntl(childEnds[r], F_SETFD, 0);  // the one descriptor that survives exec
  if (!plan.masks.empty()) ::sched_setaffinity(0, sizeof(cpu_set_t), &plan.masks[r]);
  if (spec.childMain) {
    // Like exec, start from default signal dispositions (a test harness's handlers would
    // otherwise report our SIGTERM as its own failure).
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGSEGV, SIGABRT}) ::signal(sig, SIG_DFL);
    for (char* const* e = plan.envps[r].data(); *e; ++e) ::putenv(*e);
    std::fflush(nullptr);
    int code = spec.childMain();
    std::fflush(nullptr);
    ::_exit(code);
  }
  ::execvpe(plan.argv[0], plan.argv.data(), plan.envps[r].data());
  const char* msg = "ringcc-run: cannot execute ";
  (void)!::write(2, msg, std::strlen(msg));
  (void)!::write(2, plan.argv[0], std::strlen(plan.argv[0]));
  (void)!::write(2, "\n", 1);
  ::_exit(127);
}

// Bringing the children down together, and the exit code to report. Every way a run ends
// early (a crash, a failed exit, a signal to the launcher, the timeout, a failed fork) goes
// through start(); the loop sends what is due each round (signalDue).
class Shutdown {
 public:
  explicit Shutdown(double graceSec)
      : grace_(
            std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(graceSec))) {}

  bool stopping() const { return stopping_; }
  int code() const { return firstCode_; }
  // The first non-zero code is the launcher's.
  void noteCode(int code) {
    if (code != 0 && firstCode_ == 0) firstCode_ = code;
  }
  // SIGTERM now or one grace period from now, SIGKILL one grace period after that.
  void start(bool now) {
    if (stopping_) return;
    stopping_ = true;
    termAt_ = Clock::now() + (now ? Clock::duration::zero() : grace_);
    killAt_ = termAt_ + grace_;
  }
  void signalDue(std::vector<Child>& children) {
    if (stopping_ && !termSent_ && Clock::now() >= termAt_) {
      termSent_ = true;
      for (Child& c : children)
        if (c.pid > 0 && !c.exited) ::kill(c.pid, SIGTERM);
    }
    if (termSent_ && !killSent_ && Clock::now() >= killAt_) {
      killSent_ = true;
      for (Child& c : children)
        if (c.pid > 0 && !c.exited) ::kill(c.pid, SIGKILL);
    }
  }

 private:
  const Clock::duration grace_;
  int firstCode_ = 0;
  bool stopping_ = false, termSent_ = false, killSent_ = false;
  Clock::time_point termAt_{}, killAt_{};
};

// Forks every child; a failed fork brings those already started down.
void startChildren(const LaunchSpec& spec, std::vector<Child>& children,
                   const std::vector<int>& childEnds, ExecPlan& plan, Shutdown& down, FILE* err) {
  for (int r = 0; r < spec.nprocs; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) {
      std::fprintf(err, "ringcc-run: fork: %s\n", std::strerror(errno));
      down.noteCode(1);
      down.start(true);
      break;
    }
    if (pid == 0) runChild(spec, r, children, childEnds, plan);
    children[r].pid = pid;
  }
}

bool anyRunning(const std::vector<Child>& children) {
  for (const Child& c : children)
    if (c.pid > 0 && !c.exited) return true;
  return false;
}

// Control requests: reads what the children's channels have (waiting up to 20 ms for any),
// keeping at most one whole request per child (launch_protocol.h).
void readControl(std::vector<Child>& children, FILE* err) {
  std::vector<pollfd> pfds;
  std::vector<int> owner;
  for (size_t r = 0; r < children.size(); ++r) {
    if (children[r].fd < 0) continue;
    pfds.push_back(pollfd{children[r].fd, POLLIN, 0});
    owner.push_back(static_cast<int>(r));
  }
  if (::poll(pfds.data(), pfds.size(), 20) <= 0) return;
  for (size_t k = 0; k < pfds.size(); ++k) {
    if (!(pfds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    Child& c = children[owner[k]];
    char chunk[65536];
    ssize_t got = ::read(c.fd, chunk, sizeof(chunk));
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) {
      closeFd(c);
      continue;
    }
    c.inbuf.append(chunk, static_cast<size_t>(got));
    bool bad = false;
    std::optional<CtrlMessage> m = decodeCtrl(c.inbuf, bad);
    if (bad || (m && c.pending) || (m && !c.inbuf.empty())) {
      std::fprintf(err, "ringcc-run: process %d broke the control protocol\n", owner[k]);
      closeFd(c);
      continue;
    }
    if (m) c.pending = std::move(m);
  }
}

// Answers the requests once every child has one (they are collective: each is a step all the
// processes take together), or ends them with end-of-file once a child left.
void answerControl(std::vector<Child>& children, FILE* err) {
  bool allOpen = true, anyPending = false, allPending = true;
  for (const Child& c : children) {
    if (c.fd < 0) allOpen = false;
    if (c.pending)
      anyPending = true;
    else
      allPending = false;
  }
  if (anyPending && !allOpen) {
    // A process left; those waiting for it would wait forever. End-of-file tells them.
    for (Child& c : children)
      if (c.pending) closeFd(c);
    return;
  }
  if (!allPending || !allOpen) return;
  std::vector<CtrlMessage> reqs;
  for (Child& c : children) reqs.push_back(std::move(*c.pending));
  CtrlMessage reply;
  std::string why;
  if (!combineCtrl(reqs, reply, why)) {
    std::fprintf(err, "ringcc-run: %s\n", why.c_str());
    for (Child& c : children) closeFd(c);
    return;
  }
  std::string bytes = encodeCtrl(reply);
  for (Child& c : children) {
    c.pending.reset();
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t w = ::write(c.fd, bytes.data() + done, bytes.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;
      done += static_cast<size_t>(w);
    }
    if (done < bytes.size()) closeFd(c);
  }
}

// Exits: notes every child that ended, and starts bringing the others down after a failure.
void reapChildren(std::vector<Child>& children, Shutdown& down, FILE* err) {
  int status = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
    for (size_t r = 0; r < children.size(); ++r) {
      Child& c = children[r];
      if (c.pid != pid || c.exited) continue;
      c.exited = true;
      int code = statusCode(status);
      if (code == 0) continue;
      // A crash stops the others at once. After a plain non-zero exit they get a grace
      // period first: they usually end by themselves (every rank reports the same data
      // error), and process 0 may still be printing the report.
      bool crashed = WIFSIGNALED(status);
      if (!down.stopping())
        std::fprintf(err, "ringcc-run: process %zu (pid %d) %s %d; stopping the others%s\n", r,
                     static_cast<int>(pid), crashed ? "killed by signal" : "exited with code",
                     crashed ? WTERMSIG(status) : code, crashed ? "" : " unless they end");
      down.noteCode(code);
      down.start(crashed);
    }
  }
}

}  // namespace

// Shaped as the list of what the launcher does, in order: channels, the children's exec
// arguments, the forks, then the loop that serves the control channels, reaps exits and
// brings everyone down together; each of those is a function above.
int runLaunch(const LaunchSpec& spec, FILE* err, const volatile sig_atomic_t* stop) {
  const int n = spec.nprocs;
  std::vector<Child> children(n);
  std::vector<int> childEnds(n, -1);
  if (!openChannels(children, childEnds, err)) return 1;
  ExecPlan plan;
  planExec(spec, childEnds, &plan);

  std::fflush(nullptr);
  Shutdown down(spec.graceSec);
  startChildren(spec, children, childEnds, plan, down, err);
  for (int& fd : childEnds) ::close(fd);

  const auto start = Clock::now();
  while (anyRunning(children)) {
    readControl(children, err);
    answerControl(children, err);
    reapChildren(children, down, err);
    if (stop && *stop && !down.stopping()) {
      down.noteCode(128 + static_cast<int>(*stop));
      down.start(true);
    }
    if (spec.timeoutSec > 0 && !down.stopping() &&
        Clock::now() - start > std::chrono::duration<double>(spec.timeoutSec)) {
      std::fprintf(err, "ringcc-run: timeout after %g s; stopping all processes\n",
                   spec.timeoutSec);
      down.noteCode(124);
      down.start(true);
    }
    down.signalDue(children);
  }
  for (Child& c : children) closeFd(c);
  return down.code();
}

}  // namespace ringcc::bench
