// Transports: how a FIFO connection between two ranks is made, and who owns its memory.
//
// A connection carries data one way, from a sender rank to a receiver rank, through the FIFO
// of transports/connector_device.h. Making one takes two calls and one message:
//
//   receiver                                       sender
//   t = selectTransport(self, peer)                t = selectTransport(self, peer)
//   t->setupRecv(spec, &blob, &recvConn)
//        ── blob (ConnBlob, 256 bytes, shipped by the caller through the bootstrap) ──►
//                                                  t->connectSend(spec, blob, &sendConn)
//
// Both sides then use conn->view(): the sender fills slots and moves `tail`, the receiver
// drains them and moves `head` (memory ordering: transports/fifo_host.h).
//
// Contract, for every transport:
//
// Ownership. The receiver allocates the FIFO (counters, sizes and slots) in memory it can
// read, because the receiver is the one that polls. Each side's Connector owns what that side
// acquired (an allocation, a mapping, a reference) and releases it in its destructor, never
// earlier. A ConnectorView is a borrowed pointer into that memory: valid while its Connector
// lives. Transports are stateless singletons owned by the registry; they live for the process.
//
// Blocking. setupRecv and connectSend never wait for the other side: they allocate or map and
// return. Neither does Connector's destructor. All waiting is on the FIFO counters through
// fifo_host.h, which always honours an abort flag and a deadline.
//
// Order and lifetime. The receiver's setupRecv precedes the sender's connectSend (the blob
// travels between them), and the receiver's Connector must live until connectSend returned
// (the caller's exchange-then-barrier setup guarantees it). After that either side may destroy
// its Connector at any time, in any order: the other side's memory stays valid, and its waits
// end with ncclRemoteError, because peerState() then reports Closed. A side must not destroy
// its Connector while one of its own threads still uses the view.
//
// Threads and locks. Transport calls are thread-safe (they share no mutable state beyond an
// atomic name counter). One Connector is used by one thread at a time on each side (single
// producer, single consumer); peerState() may be called from any thread. No transport holds a
// lock while it calls out, and none calls back into the caller, so there is no lock order to
// respect.
//
// Errors. Bad specs return ncclInvalidArgument, a blob that is not for this transport or
// process ncclInvalidUsage, OS failures (no memory, /dev/shm full) ncclSystemError; each one is
// logged through fail() with the peer's rank.
//
// Adding a transport: a folder transports/<name>/ with a Transport subclass and its meson.build
// (plus its subdir line), and one line in the registry (transports/registry.cc). Transports that
// need the CPU to move data (UCX) will add a progress hook driven by src/proxy; p2p and shm need
// none, because the FIFO memory itself is shared. docs/transports.md tells the same in prose.
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <type_traits>

#include "nccl.h"
#include "transports/connector_device.h"

namespace ringcc {

// ---------------------------------------------------------------------------------------------
// Who a rank is, as far as transports care. Plain data, exchanged by the caller's allgather.

enum class MemoryKind : uint32_t { Host = 0, Cuda = 1 };

struct PeerInfo {
  int32_t rank = -1;
  int32_t pid = 0;
  uint64_t hostHash = 0;      // hash of host name + boot id: equal means same running kernel
  uint64_t pidNamespace = 0;  // inode of /proc/self/ns/pid (0 if unknown): pids compare within one
  MemoryKind memory = MemoryKind::Host;
  int32_t cudaDev = -1;  // -1 for host memory
  int64_t busId = -1;    // PCI bus id of cudaDev, -1 for host memory
};
static_assert(std::is_trivially_copyable_v<PeerInfo>);

// This process's PeerInfo for `rank` (hostHash, pid, pid namespace filled in).
PeerInfo localPeerInfo(int rank, MemoryKind memory = MemoryKind::Host, int cudaDev = -1,
                       int64_t busId = -1);

// Hash of this machine's host name and boot id (same value in every process of this boot).
uint64_t localHostHash();

// Same running kernel (so /dev/shm and futexes are shared).
bool sameHost(const PeerInfo& a, const PeerInfo& b);

// Same process: same host, same pid namespace, same pid.
bool sameProcess(const PeerInfo& a, const PeerInfo& b);

// ---------------------------------------------------------------------------------------------
// What a connection looks like. Both sides must pass the same nSlots and slotBytes.

struct ConnSpec {
  uint32_t nSlots = 8;     // power of two, 1..kMaxSlots
  uint32_t slotBytes = 0;  // multiple of 64, >= 64
  int32_t channel = 0;     // for names and logs only
  PeerInfo self;           // this rank
  PeerInfo peer;           // the other end: the sender for setupRecv, the receiver for connectSend
};

inline constexpr uint32_t kDefaultSlots = 8;
inline constexpr uint32_t kMaxSlots = 4096;
inline constexpr uint64_t kMaxConnBytes = uint64_t{1} << 30;  // nSlots * slotBytes

// Slot memory of `bytes` (NCCL_BUFFSIZE) cut into `nSlots` slots; bytes is clamped to
// [nSlots * 64, kMaxConnBytes] and each slot rounded down to a multiple of 64.
ConnSpec connSpecForBuffer(int64_t bytes, uint32_t nSlots = kDefaultSlots);

// connSpecForBuffer(NCCL_BUFFSIZE): kDefaultSlots slots (512 KiB -> 8 x 64 KiB). A BUFFSIZE out
// of range is clamped with a WARN. The caller fills channel, self and peer.
ConnSpec defaultConnSpec();

// ncclInvalidArgument (logged, naming the field) unless nSlots and slotBytes are usable.
ncclResult_t checkConnSpec(const ConnSpec& spec, const char* where);

// Total slot bytes of a spec.
inline uint64_t connSlotBytes(const ConnSpec& s) { return uint64_t{s.nSlots} * s.slotBytes; }

// ---------------------------------------------------------------------------------------------
// The message from receiver to sender: fixed size, plain bytes, safe to copy anywhere.

inline constexpr size_t kConnBlobBytes = 256;

struct ConnBlob {
  char transport[8];  // name of the transport that made it, NUL-terminated
  uint32_t version;   // layout version of the payload
  uint32_t size;      // payload bytes used
  unsigned char payload[kConnBlobBytes - 16];
};
static_assert(sizeof(ConnBlob) == kConnBlobBytes);
static_assert(std::is_trivially_copyable_v<ConnBlob>);

// Packs a transport's own POD `data` into a blob.
template <typename T>
void packConnBlob(const char* transport, uint32_t version, const T& data, ConnBlob* out) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(ConnBlob::payload));
  std::memset(out, 0, sizeof(*out));
  std::strncpy(out->transport, transport, sizeof(out->transport) - 1);
  out->version = version;
  out->size = sizeof(T);
  std::memcpy(out->payload, &data, sizeof(T));
}

// Unpacks it again; ncclInvalidUsage (logged) if the blob was made by another transport or
// layout version.
ncclResult_t unpackConnBlobBytes(const ConnBlob& blob, const char* transport, uint32_t version,
                                 void* data, size_t size, int peerRank);

template <typename T>
ncclResult_t unpackConnBlob(const ConnBlob& blob, const char* transport, uint32_t version, T* data,
                            int peerRank) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(ConnBlob::payload));
  return unpackConnBlobBytes(blob, transport, version, data, sizeof(T), peerRank);
}

// ---------------------------------------------------------------------------------------------
// The owning host object of one side of one connection.

enum class ConnSide : uint8_t { Recv, Send };

// What a side knows about the other end of its connection.
enum class PeerState : uint8_t {
  Open,    // the peer still holds its side
  Closed,  // the peer destroyed its Connector (orderly close or abort)
  Dead,    // the peer's process exited without closing (crash, SIGKILL)
};

const char* peerStateName(PeerState s);

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

 protected:
  Connector(ConnSide side, int peerRank, const ConnectorView& view)
      : view_(view), side_(side), peerRank_(peerRank) {}

  ConnectorView view_;

 private:
  ConnSide side_;
  int peerRank_;
};

// ---------------------------------------------------------------------------------------------
// A way of connecting two ranks.

class Transport {
 public:
  virtual ~Transport() = default;

  virtual const char* name() const = 0;

  // Pure: whether this transport can connect `self` with `peer`. When it cannot and `why` is
  // not null, sets *why to a short reason ("not the same process").
  virtual bool canConnect(const PeerInfo& self, const PeerInfo& peer, std::string* why) const = 0;

  // Receiver side: allocates the FIFO for spec.nSlots x spec.slotBytes, fills *blob for the
  // sender and returns the receiving Connector. spec.peer is the sending rank.
  virtual ncclResult_t setupRecv(const ConnSpec& spec, ConnBlob* blob,
                                 std::unique_ptr<Connector>* conn) = 0;

  // Sender side: attaches to the FIFO the receiver's blob describes and returns the sending
  // Connector. spec must have the receiver's nSlots and slotBytes; spec.peer is the receiver.
  virtual ncclResult_t connectSend(const ConnSpec& spec, const ConnBlob& blob,
                                   std::unique_ptr<Connector>* conn) = 0;

  // Releases what `peer` left behind if its process has exited (shm: the names of segments it
  // created whose sender never attached); does nothing while it lives. Called when a
  // communicator with that peer goes away. Never blocks; thread-safe.
  virtual void cleanUpAfter(const PeerInfo& self, const PeerInfo& peer) {
    (void)self;
    (void)peer;
  }
};

// ---------------------------------------------------------------------------------------------
// Registry: every transport, in order of preference.

struct TransportEntry {
  Transport* transport;
  const char* disableParam;  // parameter that turns it off when 1 ("P2P_DISABLE"), or nullptr
};

std::span<const TransportEntry> transportRegistry();

// The transport registered under `name`, or nullptr.
Transport* findTransport(const char* name);

// Transport::cleanUpAfter of every transport, for each of `peers` other than `self`.
void cleanUpAfterPeers(const PeerInfo& self, std::span<const PeerInfo> peers);

// The first registered transport that is enabled and can connect self with peer (p2p within
// one process, then shm within one host). Otherwise ncclSystemError, logged with the reason
// each transport declined, and a note that the network transport (UCX) is not available yet.
ncclResult_t selectTransport(const PeerInfo& self, const PeerInfo& peer, Transport** out);

}  // namespace ringcc
