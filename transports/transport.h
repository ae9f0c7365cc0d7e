// Transports: how a FIFO connection between two ranks is made, and who owns its memory.
// This is contract v2 (connection infos of any size, both ways; a progress hook; a doorbell).
//
// A connection carries data one way, from a sender rank to a receiver rank, through the FIFO
// of kernels/connector_device.h. Making one takes two calls on each side and one message
// each way:
//
//   receiver                                       sender
//   t = selectTransport(self, peer)                t = selectTransport(self, peer)
//   t->setup(Recv, spec, &recvInfo, &pending)      t->setup(Send, spec, &sendInfo, &pending)
//        ── recvInfo ──────────────────────────────────────────────────────────►
//        ◄──────────────────────────────────────────────────────────── sendInfo ──
//   pending->connect(sendInfo, &conn)              pending->connect(recvInfo, &conn)
//
// The caller ships the infos (ConnInfo: a {transport, version, side} header and a payload of
// any size up to kMaxConnInfoBytes) through the bootstrap; ConnInfoHeader is their wire form.
// Both sides then use conn->view(): the sender fills slots and moves `tail`, the receiver
// drains them and moves `head` (memory ordering: transports/fifo_host.h).
//
// Contract, for every transport:
//
// Ownership. The receiver allocates the FIFO (counters, sizes, Simple slots and LL slots) in
// memory it can read, because the receiver is the one that polls; its setup does it, so its
// info can describe the memory. A side's PendingConnection owns what that side's setup
// acquired until connect hands it on to the Connector; destroying a PendingConnection that was
// never connected releases it (an abandoned or failed connection) and, to a peer that already
// connected, looks like a close. Each Connector owns what its side acquired (an allocation, a
// mapping, a reference, an endpoint) and releases it in its destructor, never earlier. A
// ConnectorView is a borrowed pointer into that memory: valid while its Connector lives.
// Transports are stateless singletons owned by the registry; they live for the process.
//
// Blocking. setup, connect and the destructors of PendingConnection and Connector never wait
// for the other side: they allocate, map, attach or check, and return. progress() never
// blocks either. All waiting is the caller's: for the peer's info on the bootstrap, and on the
// FIFO counters through fifo_host.h, which always honours an abort flag and a deadline.
//
// Order and lifetime. Each side calls setup before it sends its info, and connect (at most
// once) with the other side's info; the two sides run independently otherwise, so the
// sender's connect may come before or after the receiver's. A receiver destroyed before the
// sender's connect makes that connect fail with ncclRemoteError and never touch freed memory
// (p2p checks a serial, shm finds the name gone). After both connected, either side may
// destroy its Connector at any time, in any order: the other side's memory stays valid, and
// its waits end with ncclRemoteError, because peerState() then reports Closed. A side must not
// destroy its Connector while one of its own threads still uses the view, or while a progress
// thread may call progress() on it.
//
// Threads and locks. Transport calls are thread-safe (they share no mutable state beyond
// process-wide tables under their own locks). One PendingConnection and one Connector are used
// by one thread at a time on each side (single producer, single consumer); peerState() may be
// called from any thread. No transport holds a lock while it calls out, and none calls back
// into the caller, so there is no lock order to respect.
//
// Progress. A transport whose FIFO memory is not shared by both sides (a network, GPU memory
// staged through the host) needs a CPU thread to move the slots: its Connectors answer true to
// needsProgress(), and the proxy thread (transports/proxy, one per process) calls
// progress() on them from the moment connect returned until it is told to stop, before the
// Connector is destroyed. progress() never blocks, is called from that one thread only, and
// reports a failure once as its result (logged with the peer's rank); the proxy then stops
// calling it, and the transport reports the failure through peerState() (Dead), so the
// runner's waits on that connection fail naming the peer, and the operation's error becomes
// the communicator's async error. p2p and shm share the FIFO memory and need no progress.
//
// Doorbell. Such a transport also sets ConnectorView::doorbell to a FifoCounter in memory its
// proxy can read; the proxy sleeps on it (fifo_host.h) when it has nothing to move, and whoever
// publishes a counter on the connection (tail on the send side, head on the receive side) also
// bumps the doorbell and wakes it. p2p and shm leave it null: their peer sleeps on the FIFO
// counters themselves. A CUDA rank's kernel cannot wake a host thread: its connections leave
// the doorbell null and answer fedByDevice(), and the proxy polls them (the CUDA engine wakes
// it once per launch that uses them).
//
// Geometry. Both sides must pass the same nSlots, slotBytes and llSlotBytes. Transport::setup
// stamps its spec's geometry on the info it returns (ConnInfo::geometry, shipped in the
// header), and PendingConnection::connect compares the peer's with its own before the
// transport sees the info: the one per-connection check, the same for every transport. (A
// communicator agrees on NCCL_BUFFSIZE at init, src/exec/engine_setup.h, so there this check
// only ever fails on a bug; a transport's own tests make mismatched pairs on purpose.) A
// transport takes the geometry from its own spec, never from the peer's payload.
//
// Errors. Bad specs return ncclInvalidArgument; an info made by another transport, layout
// version or side, for another process, or for another geometry ncclInvalidUsage; a peer that
// closed before we attached ncclRemoteError; OS failures (no memory, /dev/shm full)
// ncclSystemError; each one is logged through failPeer() with the peer's rank.
//
// Adding a transport: a folder transports/<name>/ with a Transport subclass (and its
// PendingConnection and Connector subclasses) and its meson.build (plus its subdir line), and
// one line in the registry (transports/registry.cc). docs/transports.md tells the same in prose.
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/connector_device.h"
#include "nccl.h"
#include "src/base/peer_info.h"

namespace ringcc {

// ---------------------------------------------------------------------------------------------
// What a connection looks like. Both sides must pass the same nSlots, slotBytes and llSlotBytes
// (PendingConnection::connect checks the other side's against its own spec: "Geometry" above).

inline constexpr uint32_t kDefaultSlots = 8;
inline constexpr uint32_t kMaxSlots = 4096;
inline constexpr uint64_t kMaxConnBytes = uint64_t{1} << 30;  // nSlots * slotBytes, and LL too
inline constexpr uint32_t kDefaultLlSlotBytes = 8192;         // 512 LlLines: 4 KiB of data per slot

struct ConnSpec {
  uint32_t nSlots = kDefaultSlots;             // power of two, 1..kMaxSlots
  uint32_t slotBytes = 0;                      // Simple slots: multiple of 64, >= 64
  uint32_t llSlotBytes = kDefaultLlSlotBytes;  // LL slots: multiple of kLlLineBytes; 0: no LL
  int32_t channel = 0;                         // for names and logs only
  PeerInfo self;                               // this rank
  PeerInfo peer;                               // the other end of the connection
};

// Slot memory of `bytes` (NCCL_BUFFSIZE) cut into `nSlots` slots; bytes is clamped to
// [nSlots * 64, kMaxConnBytes] and each slot rounded down to a multiple of 64. LL slots get
// kDefaultLlSlotBytes.
ConnSpec connSpecForBuffer(int64_t bytes, uint32_t nSlots = kDefaultSlots);

// connSpecForBuffer(NCCL_BUFFSIZE): kDefaultSlots slots (1 MiB -> 8 x 128 KiB). A BUFFSIZE out
// of range is clamped with a WARN. The caller fills channel, self and peer.
ConnSpec defaultConnSpec();

// ncclInvalidArgument (logged, naming the field) unless nSlots, slotBytes and llSlotBytes are
// usable.
ncclResult_t checkConnSpec(const ConnSpec& spec, const char* where);

// Total Simple slot bytes of a spec.
inline uint64_t connSlotBytes(const ConnSpec& s) { return uint64_t{s.nSlots} * s.slotBytes; }

// Total LL slot bytes of a spec (0: the connection has no LL memory).
inline uint64_t connLlBytes(const ConnSpec& s) { return uint64_t{s.nSlots} * s.llSlotBytes; }

// The geometry part of a spec, as every info carries it (ConnInfo::geometry) so that the other
// side can check that both agree.
struct ConnGeometry {
  uint32_t nSlots;
  uint32_t slotBytes;
  uint32_t llSlotBytes;
  uint32_t pad;
};
static_assert(std::is_trivially_copyable_v<ConnGeometry>);

inline ConnGeometry connGeometry(const ConnSpec& s) {
  return ConnGeometry{s.nSlots, s.slotBytes, s.llSlotBytes, 0};
}

// ncclInvalidUsage (logged with the peer's rank) unless the peer's geometry equals spec's: the
// usual cause is NCCL_BUFFSIZE differing between ranks.
ncclResult_t checkConnGeometry(const ConnSpec& spec, const ConnGeometry& remote, const char* where);

// ---------------------------------------------------------------------------------------------
// Connection info: what one side of a connection tells the other, any size, either way.

enum class ConnSide : uint8_t { Recv, Send };

const char* connSideName(ConnSide s);

inline constexpr size_t kTransportNameBytes = 16;                 // with the terminating NUL
inline constexpr uint64_t kMaxConnInfoBytes = uint64_t{1} << 20;  // payload limit

struct ConnInfo {
  char transport[kTransportNameBytes] = {};  // the transport that made it, NUL-terminated
  uint32_t version = 0;                      // layout version of the payload
  ConnSide side = ConnSide::Recv;            // the side that made it
  ConnGeometry geometry{};                   // the maker's spec (Transport::setup sets it)
  std::vector<uint8_t> payload;              // the transport's own bytes
};

// The fixed-size wire form of a ConnInfo's header: a caller ships it, then payloadBytes bytes
// of payload (nothing if 0). Plain bytes, safe to copy anywhere.
struct ConnInfoHeader {
  char transport[kTransportNameBytes];
  uint32_t version;
  uint8_t side;  // ConnSide
  uint8_t pad[3];
  uint64_t payloadBytes;
  ConnGeometry geometry;
};
static_assert(sizeof(ConnInfoHeader) == 48);
static_assert(std::is_trivially_copyable_v<ConnInfoHeader>);

ConnInfoHeader connInfoHeader(const ConnInfo& info);

// Starts *info from a header that came from rank `peerRank`, with a payload of the announced
// size (zero-filled, for the caller to receive into). ncclRemoteError (logged) if the header is
// malformed: an unterminated name, an unknown side, or a payload beyond kMaxConnInfoBytes.
ncclResult_t connInfoFromHeader(const ConnInfoHeader& header, int peerRank, ConnInfo* info);

// Packs a transport's own POD `fixed`, followed by `tail` (variable bytes: a network worker's
// address, say), into *out. ncclInvalidArgument (logged) if the name is too long or the
// payload exceeds kMaxConnInfoBytes.
ncclResult_t packConnInfoBytes(const char* transport, uint32_t version, ConnSide side,
                               const void* fixed, size_t fixedBytes, std::span<const uint8_t> tail,
                               ConnInfo* out);

template <typename T>
ncclResult_t packConnInfo(const char* transport, uint32_t version, ConnSide side, const T& fixed,
                          ConnInfo* out, std::span<const uint8_t> tail = {}) {
  static_assert(std::is_trivially_copyable_v<T>);
  return packConnInfoBytes(transport, version, side, &fixed, sizeof(T), tail, out);
}

// Unpacks it again, checking that `info` was made by `transport` at `version` on side `from`
// (the other side's: a receiver unpacks a Send info). Without `tail` the payload must be
// exactly the fixed part; with it, *tail receives what follows. ncclInvalidUsage (logged with
// peerRank and `where`) on any mismatch.
ncclResult_t unpackConnInfoBytes(const ConnInfo& info, const char* transport, uint32_t version,
                                 ConnSide from, void* fixed, size_t fixedBytes,
                                 std::vector<uint8_t>* tail, int peerRank, const char* where);

template <typename T>
ncclResult_t unpackConnInfo(const ConnInfo& info, const char* transport, uint32_t version,
                            ConnSide from, T* fixed, int peerRank, const char* where,
                            std::vector<uint8_t>* tail = nullptr) {
  static_assert(std::is_trivially_copyable_v<T>);
  return unpackConnInfoBytes(info, transport, version, from, fixed, sizeof(T), tail, peerRank,
                             where);
}

// ---------------------------------------------------------------------------------------------
// The owning host object of one side of one connection.

// What a side knows about the other end of its connection.
enum class PeerState : uint8_t {
  Open,    // the peer still holds its side (or has not connected yet)
  Closed,  // the peer destroyed its Connector or PendingConnection (orderly close or abort)
  Dead,    // the peer's process exited without closing (crash, SIGKILL)
};

const char* peerStateName(PeerState s);

// What the closes of one ConnectionTable::closeAll share, so that one communicator's close
// never shortens another's: after one connection's drain stalled (its peer lives but stopped
// reading), the next ones of the same close wait briefly, being most likely the same failed
// operation's other connections (n full stalls would add up).
struct CloseScope {
  bool drainStalled = false;
};

class Connector {
 public:
  virtual ~Connector() = default;
  Connector(const Connector&) = delete;
  Connector& operator=(const Connector&) = delete;

  // What the primitives use. Valid for this Connector's lifetime.
  const ConnectorView& view() const { return view_; }
  ConnSide side() const { return side_; }
  int peerRank() const { return peerRank_; }
  virtual const char* transportName() const = 0;

  // Never blocks; cheap enough to call every few milliseconds (an atomic load, at most a
  // zero-timeout poll). Thread-safe.
  virtual PeerState peerState() const = 0;

  // Whether a proxy thread must call progress() for data to move (see "Progress" above).
  // Constant for the Connector's lifetime. p2p and shm: false.
  virtual bool needsProgress() const { return false; }

  // Whether this side's runner is a CUDA kernel, which publishes counters in host-mapped
  // memory but cannot ring a doorbell (its view's doorbell is null): the proxy must then look
  // at the counters itself, napping briefly instead of sleeping (transports/proxy). Constant.
  virtual bool fedByDevice() const { return false; }

  // The FIFO's control block at an address this process's host threads may write, or null
  // (FIFO memory in a GPU). A CUDA engine writes failReason there when the peer's process
  // dies, which its kernels cannot see by themselves (src/cuda/peer_watch.h).
  virtual FifoControl* hostControl() const { return nullptr; }

  // Moves what can be moved now without waiting (posts sends of filled slots, completes
  // received ones) and sets *moved if anything changed, so the proxy knows whether to poll
  // again at once or to sleep on the doorbell. Called from the proxy thread only. An error is
  // returned once, logged with the peer's rank; afterwards the Connector is of no further use.
  // The default (for transports that need no progress) moves nothing.
  virtual ncclResult_t progress(bool* moved) {
    *moved = false;
    return ncclSuccess;
  }

  // The data in flight no longer matters (its operation failed): the destructor may skip
  // waiting for the peer to take what was published. Transports whose destructor never waits
  // (p2p, shm) ignore it.
  virtual void discard() {}

  // Ends this side before its destruction, waiting (bounded) for what the transport needs
  // the peer to take first; `scope` is shared by the closes of one closeAll. Transports whose
  // destructor never waits (p2p, shm) close nothing here.
  virtual void close(CloseScope& scope) { (void)scope; }

 protected:
  Connector(ConnSide side, int peerRank, const ConnectorView& view)
      : view_(view), side_(side), peerRank_(peerRank) {}

  ConnectorView view_;

 private:
  ConnSide side_;
  int peerRank_;
};

// One side of a connection between setup and connect: owns what setup acquired (the
// receiver's FIFO memory, an endpoint) until connect hands it on to the Connector.
class PendingConnection {
 public:
  virtual ~PendingConnection() = default;
  PendingConnection(const PendingConnection&) = delete;
  PendingConnection& operator=(const PendingConnection&) = delete;

  ConnSide side() const { return side_; }
  const ConnSpec& spec() const { return spec_; }

  // Completes this side with the other side's info and returns its Connector. At most once;
  // afterwards (success or not) destroy this object: on failure it still owns, and releases,
  // what setup acquired. Checks the info's geometry against spec() (ncclInvalidUsage naming
  // NCCL_BUFFSIZE) before the transport's connectImpl sees it. Never waits for the peer.
  ncclResult_t connect(const ConnInfo& remote, std::unique_ptr<Connector>* conn);

 protected:
  PendingConnection(ConnSide side, const ConnSpec& spec) : side_(side), spec_(spec) {}

  // connect() after its common checks (conn not null, first call, the same geometry); *conn is
  // null on entry.
  virtual ncclResult_t connectImpl(const ConnInfo& remote, std::unique_ptr<Connector>* conn) = 0;

 private:
  ConnSide side_;
  ConnSpec spec_;
  bool used_ = false;
};

// ---------------------------------------------------------------------------------------------
// A way of connecting two ranks.

class Transport {
 public:
  virtual ~Transport() = default;

  // At most kTransportNameBytes - 1 characters; names the transport in infos and logs.
  virtual const char* name() const = 0;

  // Pure: whether this transport can connect `self` with `peer`. When it cannot and `why` is
  // not null, sets *why to a short reason ("not the same process").
  virtual bool canConnect(const PeerInfo& self, const PeerInfo& peer, std::string* why) const = 0;

  // One side of a connection: checks the spec, acquires what this side brings (the receiver:
  // the FIFO for spec.nSlots x spec.slotBytes plus spec.nSlots x spec.llSlotBytes of LL
  // memory), fills *info for the other side (its geometry from spec) and returns the pending
  // side. spec.peer is the other end.
  ncclResult_t setup(ConnSide side, const ConnSpec& spec, ConnInfo* info,
                     std::unique_ptr<PendingConnection>* pending);

  // Releases what `peer` left behind if its process has exited (shm: the names of segments it
  // created whose sender never attached); does nothing while it lives. Called when a
  // communicator with that peer goes away. Never blocks; thread-safe.
  virtual void cleanUpAfter(const PeerInfo& self, const PeerInfo& peer) {
    (void)self;
    (void)peer;
  }

 protected:
  // setup() after its common checks (pointers not null, checkConnSpec); the outputs are
  // cleared on entry.
  virtual ncclResult_t setupImpl(ConnSide side, const ConnSpec& spec, ConnInfo* info,
                                 std::unique_ptr<PendingConnection>* pending) = 0;
};

// ---------------------------------------------------------------------------------------------
// Registry: every transport, in order of preference.

struct TransportEntry {
  Transport* transport;
  const char* disableParam;  // parameter that turns it off when 1 ("P2P_DISABLE"), or nullptr
  bool network;              // a network transport: the one NCCL_NET=ucx forces
};

std::span<const TransportEntry> transportRegistry();

// The transport registered under `name`, or nullptr.
Transport* findTransport(const char* name);

// Transport::cleanUpAfter of every transport, for each of `peers` other than `self`.
void cleanUpAfterPeers(const PeerInfo& self, std::span<const PeerInfo> peers);

// The first registered transport that is enabled and can connect self with peer (p2p within
// one process, then shm within one host, then ucx; NCCL_NET=ucx skips the first two).
// Otherwise ncclSystemError, logged with the reason each transport declined. A bad NCCL_NET
// is ncclInvalidArgument.
ncclResult_t selectTransport(const PeerInfo& self, const PeerInfo& peer, Transport** out);

}  // namespace ringcc
