#include "net/netns_lab.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <regex>
#include <sstream>

namespace ringcc::test {

int shell(const std::string& cmd, std::string* out) {
  std::string full = cmd + " 2>&1";
  FILE* p = popen(full.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[512];
  std::string text;
  while (size_t n = fread(buf, 1, sizeof(buf), p)) text.append(buf, n);
  int st = pclose(p);
  if (out) *out = text;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

namespace {

// Namespaces of labs whose test process is gone (killed by a timeout, say).
void removeStaleLabs() {
  std::string list;
  if (shell("ip netns list", &list) != 0) return;
  std::regex re("^(rcc([0-9]+)[sh][0-9]*)");
  std::istringstream in(list);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, re)) continue;
    pid_t pid = static_cast<pid_t>(std::stol(m[2]));
    if (pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH) continue;
    shell("ip netns del " + m[1].str(), nullptr);
  }
}

}  // namespace

NetnsLab::NetnsLab(int hosts) : hosts_(hosts), prefix_("rcc" + std::to_string(getpid())) {
  removeStaleLabs();
  if (geteuid() != 0) {
    error_ = "network namespaces need root (CI runs the suite as root)";
    return;
  }
  const std::string sw = prefix_ + "s";
  if (!run("ip netns add " + sw) ||
      !run("ip -n " + sw + " link add br0 type bridge forward_delay 0 stp_state 0") ||
      !run("ip -n " + sw + " link set br0 up"))
    return;
  for (int h = 0; h < hosts; ++h) {
    const std::string ns = nsName(h), port = "p" + std::to_string(h);
    if (!run("ip netns add " + ns) ||
        !run("ip -n " + sw + " link add " + port + " type veth peer name " + ifName(h) + " netns " +
             ns) ||
        !run("ip -n " + sw + " link set " + port + " master br0 up") ||
        !run("ip -n " + ns + " addr add " + address(h) + "/24 dev " + ifName(h)) ||
        !run("ip -n " + ns + " link set " + ifName(h) + " up") ||
        !run("ip -n " + ns + " link set lo up"))
      return;
  }
  // UCX takes only running interfaces: wait (at most 5 s) for every host's carrier.
  for (int h = 0; h < hosts; ++h) {
    std::string out;
    for (int i = 0; i < 100; ++i) {
      shell("ip -n " + nsName(h) + " link show " + ifName(h), &out);
      if (out.find("LOWER_UP") != std::string::npos) break;
      usleep(50000);
    }
    if (out.find("LOWER_UP") == std::string::npos) {
      error_ = "host " + std::to_string(h) + "'s " + ifName(h) + " has no carrier: " + out;
      return;
    }
  }
}

NetnsLab::~NetnsLab() {
  for (int h = 0; h < hosts_; ++h) shell("ip netns del " + nsName(h) + " 2>/dev/null", nullptr);
  shell("ip netns del " + prefix_ + "s 2>/dev/null", nullptr);
}

std::string NetnsLab::nsName(int host) const { return prefix_ + "h" + std::to_string(host); }

bool NetnsLab::run(const std::string& cmd) {
  std::string out;
  if (shell(cmd, &out) == 0) return true;
  error_ = "'" + cmd + "' failed: " + out;
  return false;
}

bool NetnsLab::enter(int host) const {
  const std::string path = "/run/netns/" + nsName(host);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  int rc = setns(fd, CLONE_NEWNET);
  close(fd);
  if (rc != 0) return false;
  // As `ip netns exec` does: a private mount namespace with a sysfs of the new network
  // namespace, since UCX finds its devices in /sys/class/net.
  if (unshare(CLONE_NEWNS) != 0) return false;
  if (mount("", "/", nullptr, MS_SLAVE | MS_REC, nullptr) != 0) return false;
  umount2("/sys", MNT_DETACH);
  return mount(nsName(host).c_str(), "/sys", "sysfs", 0, nullptr) == 0;
}

std::string NetnsLab::linkDown(int host) const {
  std::string out;
  if (shell("ip -n " + nsName(host) + " link set " + ifName(host) + " down", &out) == 0) return "";
  return out.empty() ? "failed" : out;
}

std::string NetnsLab::remaining() const {
  std::string list, left;
  shell("ip netns list", &list);
  std::istringstream in(list);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix_, 0) == 0) left += line.substr(0, line.find(' ')) + " ";
  return left;
}

}  // namespace ringcc::test
