// Sockets, addresses, interface selection and unique ids of the bootstrap.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "src/bootstrap/interfaces.h"
#include "src/bootstrap/socket.h"
#include "src/bootstrap/unique_id.h"
#include "support/test_env.h"

using namespace ringcc;
using ringcc::test::ScopedEnv;

namespace {

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

SocketAddress addr(const char* text) {
  SocketAddress a;
  REQUIRE(parseAddress(text, "test", AF_UNSPEC, &a) == ncclSuccess);
  return a;
}

NetInterface fakeIf(const char* name, const char* address) {
  return NetInterface{name, addr(address)};
}

}  // namespace

TEST_CASE("addresses parse from host:port and [ipv6]:port and print back", "[socket]") {
  SocketAddress a = addr("127.0.0.1:1234");
  CHECK(a.family() == AF_INET);
  CHECK(a.port() == 1234);
  CHECK(a.isLoopback());
  CHECK(a.toString() == "127.0.0.1:1234");

  SocketAddress b = addr("[::1]:80");
  CHECK(b.family() == AF_INET6);
  CHECK(b.port() == 80);
  CHECK(b.isLoopback());
  CHECK(b.toString() == "[::1]:80");

  SocketAddress c = addr("192.0.2.7:65535");
  CHECK_FALSE(c.isLoopback());
  CHECK(c.toString() == "192.0.2.7:65535");

  SocketAddress d = addr("localhost:99");
  CHECK(d.isLoopback());
  CHECK(d.port() == 99);

  SocketAddress out;
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536",
                          "127.0.0.1:12x", "127.0.0.1:-5", "::1:80", "[::1", "[::1]80",
                          "[::1]:", ":80", "", "no.such.host.invalid:80"}) {
    INFO(bad);
    CHECK(parseAddress(bad, "NCCL_COMM_ID", AF_UNSPEC, &out) == ncclInvalidArgument);
  }
}

TEST_CASE("wire addresses round-trip and malformed ones are refused", "[socket]") {
  for (const char* text : {"10.1.2.3:4567", "[fd00::2]:999"}) {
    SocketAddress a = addr(text), back;
    REQUIRE(SocketAddress::fromWire(a.toWire(), &back));
    CHECK(back == a);
    CHECK(back.toString() == text);
  }
  WireAddress w = addr("10.1.2.3:4567").toWire();
  SocketAddress out;
  w.family = 5;
  CHECK_FALSE(SocketAddress::fromWire(w, &out));
  w.family = 4;
  w.port = 0;
  CHECK_FALSE(SocketAddress::fromWire(w, &out));
}

TEST_CASE("NCCL_SOCKET_IFNAME: prefixes, =exact, ^exclude", "[socket]") {
  IfNameFilter f = IfNameFilter::parse("eth,ib");
  CHECK_FALSE(f.exclude);
  CHECK_FALSE(f.exact);
  CHECK(f.names == std::vector<std::string>{"eth", "ib"});
  CHECK(f.allows("eth0"));
  CHECK(f.allows("ib1"));
  CHECK_FALSE(f.allows("lo"));

  f = IfNameFilter::parse("=eth0");
  CHECK(f.exact);
  CHECK(f.allows("eth0"));
  CHECK_FALSE(f.allows("eth01"));

  f = IfNameFilter::parse("^docker,lo");
  CHECK(f.exclude);
  CHECK_FALSE(f.allows("docker0"));
  CHECK_FALSE(f.allows("lo"));
  CHECK(f.allows("eth0"));

  f = IfNameFilter::parse("^=eth0,,");
  CHECK(f.exclude);
  CHECK(f.exact);
  CHECK(f.names == std::vector<std::string>{"eth0"});
  CHECK_FALSE(f.allows("eth0"));
  CHECK(f.allows("eth1"));

  CHECK(IfNameFilter::parse("").allows("anything"));
}

TEST_CASE("interface selection on a fake machine", "[socket]") {
  const std::vector<NetInterface> list = {
      fakeIf("lo", "127.0.0.1:1"),   fakeIf("docker0", "172.17.0.1:1"),
      fakeIf("eth0", "192.0.2.2:1"), fakeIf("eth1", "10.0.0.1:1"),
      fakeIf("lo", "[::1]:1"),       fakeIf("ib0", "[fd00::5]:1"),
  };
  auto pick = [&](const char* ifname, int family = AF_UNSPEC) -> std::string {
    auto nif = selectInterface(list, ifname, family);
    return nif ? nif->name + " " + nif->address.toString() : "none";
  };
  CHECK(pick("") == "docker0 172.17.0.1:1");  // first non-loopback
  CHECK(pick("eth") == "eth0 192.0.2.2:1");
  CHECK(pick("=eth1") == "eth1 10.0.0.1:1");
  CHECK(pick("=eth") == "none");
  CHECK(pick("^docker") == "eth0 192.0.2.2:1");
  CHECK(pick("^=eth0,docker0") == "eth1 10.0.0.1:1");
  CHECK(pick("^docker,eth,ib") == "lo 127.0.0.1:1");  // loopback only as the last resort
  CHECK(pick("lo") == "lo 127.0.0.1:1");              // asked for by name: taken first
  CHECK(pick("", AF_INET6) == "ib0 [fd00::5]:1");
  CHECK(pick("lo", AF_INET6) == "lo [::1]:1");
  CHECK(pick("^ib", AF_INET6) == "lo [::1]:1");
  CHECK(pick("nope") == "none");
  CHECK(selectInterface({fakeIf("lo", "127.0.0.1:1")}, "", AF_UNSPEC)->name == "lo");

  CHECK(parseSocketFamily("") == AF_UNSPEC);
  CHECK(parseSocketFamily("AF_INET") == AF_INET);
  CHECK(parseSocketFamily("af_inet6") == AF_INET6);
  CHECK(parseSocketFamily("ipv4") == AF_INET);
  CHECK(parseSocketFamily("AF_UNIX") == -1);
}

TEST_CASE("this machine's interfaces and the environment's choice", "[socket]") {
  std::vector<NetInterface> list = listInterfaces();
  bool haveLo = false;
  for (const NetInterface& nif : list) {
    CHECK(nif.address.valid());
    CHECK(nif.address.port() == 0);
    haveLo |= nif.address.isLoopback();
  }
  CHECK(haveLo);

  ScopedEnv fam("NCCL_SOCKET_FAMILY", std::nullopt);
  NetInterface nif;
  {
    ScopedEnv e("NCCL_SOCKET_IFNAME", "=lo");
    REQUIRE(bootstrapInterface(&nif) == ncclSuccess);
    CHECK(nif.name == "lo");
    CHECK(nif.address.toString() == "127.0.0.1:0");
  }
  {
    ScopedEnv e("NCCL_SOCKET_IFNAME", "=no_such_interface");
    CHECK(bootstrapInterface(&nif) == ncclInvalidArgument);
  }
  {
    ScopedEnv e("NCCL_SOCKET_IFNAME", std::nullopt);
    ScopedEnv f("NCCL_SOCKET_FAMILY", "AF_UNIX");
    CHECK(bootstrapInterface(&nif) == ncclInvalidArgument);
  }
}

TEST_CASE("NCCL_COMM_ID makes the same id everywhere and starts no root", "[socket]") {
  ncclUniqueId a, b;
  {
    ScopedEnv e("NCCL_COMM_ID", "127.0.0.1:29500");
    REQUIRE(bootstrapGetUniqueId(&a) == ncclSuccess);
    REQUIRE(bootstrapGetUniqueId(&b) == ncclSuccess);
  }
  CHECK(std::memcmp(&a, &b, sizeof(a)) == 0);
  BootstrapId f;
  REQUIRE(bootstrapParseId(a, &f) == ncclSuccess);
  CHECK(f.fromCommId);
  CHECK(f.magic == kCommIdMagic);
  CHECK(f.root.toString() == "127.0.0.1:29500");
  {
    ScopedEnv e("NCCL_COMM_ID", "[::1]:8000");
    REQUIRE(bootstrapGetUniqueId(&a) == ncclSuccess);
    REQUIRE(bootstrapParseId(a, &f) == ncclSuccess);
    CHECK(f.root.toString() == "[::1]:8000");
  }
  {
    ScopedEnv e("NCCL_COMM_ID", "127.0.0.1");
    CHECK(bootstrapGetUniqueId(&a) == ncclInvalidArgument);
  }
  CHECK(bootstrapGetUniqueId(nullptr) == ncclInvalidArgument);
}

TEST_CASE("RINGCC_COMM_SECRET gives NCCL_COMM_ID jobs a magic of their own", "[socket]") {
  ScopedEnv c("NCCL_COMM_ID", "127.0.0.1:29500");
  auto magicWith = [](std::optional<std::string> secret) {
    ScopedEnv s("RINGCC_COMM_SECRET", secret);
    ncclUniqueId id;
    REQUIRE(bootstrapGetUniqueId(&id) == ncclSuccess);
    BootstrapId f;
    REQUIRE(bootstrapParseId(id, &f) == ncclSuccess);
    return f.magic;
  };
  const uint64_t plain = magicWith(std::nullopt);
  const uint64_t a = magicWith("correct horse battery staple");
  CHECK(plain == kCommIdMagic);
  CHECK(a != kCommIdMagic);
  CHECK(a != 0);
  CHECK(a == magicWith("correct horse battery staple"));  // every rank computes the same
  CHECK(a != magicWith("correct horse battery stapler"));
  CHECK(magicWith("") == kCommIdMagic);  // empty is unset
}

TEST_CASE("unique ids carry a random magic and a reachable root; garbage ids are refused",
          "[socket]") {
  ScopedEnv e("NCCL_COMM_ID", std::nullopt);
  ScopedEnv i("NCCL_SOCKET_IFNAME", "lo");
  ncclUniqueId a, b;
  REQUIRE(bootstrapGetUniqueId(&a) == ncclSuccess);
  REQUIRE(bootstrapGetUniqueId(&b) == ncclSuccess);
  BootstrapId fa, fb;
  REQUIRE(bootstrapParseId(a, &fa) == ncclSuccess);
  REQUIRE(bootstrapParseId(b, &fb) == ncclSuccess);
  CHECK_FALSE(fa.fromCommId);
  CHECK(fa.magic != fb.magic);
  CHECK(fa.root.isLoopback());
  CHECK(fa.root.port() != fb.root.port());
  // The id's bytes after the packed fields are zero (ids compare and hash cleanly).
  for (size_t k = 40; k < sizeof(a.internal); ++k) CHECK(a.internal[k] == 0);
  Socket s;
  CHECK(Socket::connect(fa.root, "root", WaitLimit(2000), &s) == ncclSuccess);

  ncclUniqueId zero{};
  BootstrapId f;
  CHECK(bootstrapParseId(zero, &f) == ncclInvalidArgument);
}

TEST_CASE("sockets: listen, connect, accept, send and receive with limits", "[socket]") {
  Socket listener;
  REQUIRE(Socket::listen(SocketAddress::loopback(AF_INET), &listener) == ncclSuccess);
  SocketAddress where = listener.localAddress();
  REQUIRE(where.port() != 0);
  CHECK((fcntl(listener.fd(), F_GETFD) & FD_CLOEXEC) != 0);
  CHECK((fcntl(listener.fd(), F_GETFL) & O_NONBLOCK) != 0);

  Socket client, server;
  REQUIRE(Socket::connect(where, "test server", WaitLimit(2000), &client) == ncclSuccess);
  REQUIRE(listener.accept(WaitLimit(2000), &server) == ncclSuccess);
  CHECK((fcntl(server.fd(), F_GETFD) & FD_CLOEXEC) != 0);
  CHECK((fcntl(client.fd(), F_GETFD) & FD_CLOEXEC) != 0);

  const char msg[] = "hello bootstrap";
  REQUIRE(client.sendAll(msg, sizeof(msg), WaitLimit(2000)) == ncclSuccess);
  char got[sizeof(msg)] = {};
  REQUIRE(server.recvAll(got, sizeof(got), WaitLimit(2000)) == ncclSuccess);
  CHECK(std::string(got) == msg);

  // Nothing comes: the receive ends at its deadline.
  auto t0 = std::chrono::steady_clock::now();
  CHECK(server.recvAll(got, 1, WaitLimit(200)) == ncclRemoteError);
  double s = secondsSince(t0);
  CHECK(s >= 0.19);
  CHECK(s < 2.0);

  // An abort flag ends a long wait early.
  std::atomic<bool> abortFlag{false};
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    abortFlag = true;
  });
  t0 = std::chrono::steady_clock::now();
  CHECK(server.recvAll(got, 1, WaitLimit(30000, &abortFlag)) == ncclRemoteError);
  CHECK(secondsSince(t0) < 2.0);
  setter.join();

  // The peer closes: the receive fails at once.
  client.close();
  t0 = std::chrono::steady_clock::now();
  CHECK(server.recvAll(got, 1, WaitLimit(30000)) == ncclRemoteError);
  CHECK(secondsSince(t0) < 1.0);
}

TEST_CASE("connecting to an address nobody listens on fails within the limit", "[socket]") {
  SocketAddress dead;
  {
    Socket l;
    REQUIRE(Socket::listen(SocketAddress::loopback(AF_INET), &l) == ncclSuccess);
    dead = l.localAddress();
  }
  Socket s;
  auto t0 = std::chrono::steady_clock::now();
  CHECK(Socket::connect(dead, "dead", WaitLimit(300), &s) == ncclRemoteError);
  double secs = secondsSince(t0);
  CHECK(secs >= 0.29);
  CHECK(secs < 3.0);
  CHECK_FALSE(s.valid());
}

TEST_CASE("exchange moves large blocks both ways without deadlock", "[socket]") {
  Socket listener, a, b;
  REQUIRE(Socket::listen(SocketAddress::loopback(AF_INET), &listener) == ncclSuccess);
  REQUIRE(Socket::connect(listener.localAddress(), "b", WaitLimit(2000), &a) == ncclSuccess);
  REQUIRE(listener.accept(WaitLimit(2000), &b) == ncclSuccess);
  const size_t n = 8 << 20;  // far beyond socket buffers
  std::vector<uint8_t> aOut(n), bOut(n), aIn(n), bIn(n);
  for (size_t k = 0; k < n; ++k) {
    aOut[k] = static_cast<uint8_t>(k * 7 + 1);
    bOut[k] = static_cast<uint8_t>(k * 13 + 5);
  }
  ncclResult_t rb = ncclInternalError;
  std::thread other([&] { rb = exchange(b, bOut.data(), n, b, bIn.data(), n, WaitLimit(10000)); });
  ncclResult_t ra = exchange(a, aOut.data(), n, a, aIn.data(), n, WaitLimit(10000));
  other.join();
  CHECK(ra == ncclSuccess);
  CHECK(rb == ncclSuccess);
  CHECK(aIn == bOut);
  CHECK(bIn == aOut);
}
