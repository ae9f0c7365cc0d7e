// Test helper: "hosts" made of network namespaces on this machine, joined by veth pairs to a
// bridge in a switch namespace of their own, so the machine's own namespace is never touched.
//
//   ns rcc<pid>h<i>: interface rcc<i>, 10.99.0.<i+1>/24, up (and lo)
//   ns rcc<pid>s:    bridge br0, with the other end of every host's veth (p<i>)
//
// Needs root (CI runs as root) and iproute2 (scripts/setup.sh installs it). The destructor
// deletes the namespaces (which removes their interfaces), also when a check failed; labs left
// by a test process that was killed are removed by the next lab (their pid is gone).
#pragma once

#include <string>

namespace ringcc::test {

class NetnsLab {
 public:
  explicit NetnsLab(int hosts);
  ~NetnsLab();
  NetnsLab(const NetnsLab&) = delete;
  NetnsLab& operator=(const NetnsLab&) = delete;

  // Empty when the lab is up; otherwise what failed (a command and its output).
  const std::string& error() const { return error_; }
  int hosts() const { return hosts_; }
  std::string nsName(int host) const;
  std::string ifName(int host) const { return "rcc" + std::to_string(host); }
  std::string address(int host) const { return "10.99.0." + std::to_string(host + 1); }

  // Child side: moves the calling process (single-threaded: just forked) into host's
  // namespace. False on failure (errno kept).
  bool enter(int host) const;

  // Takes host's veth down (as a pulled cable would). Returns the command's error ("" if ok).
  std::string linkDown(int host) const;

  // Names of namespaces that currently exist whose name starts with this lab's prefix.
  std::string remaining() const;

 private:
  bool run(const std::string& cmd);

  int hosts_;
  std::string prefix_;
  std::string error_;
};

// Runs `cmd` through /bin/sh; returns its exit status and puts its output into *out.
int shell(const std::string& cmd, std::string* out);

}  // namespace ringcc::test
