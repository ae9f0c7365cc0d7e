#include "unit/bench_fake_comm.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "bench/perf/datatypes.h"

namespace ringcc::test {
namespace {

using bench::decodeValue;
using bench::encodeValue;
using bench::typeInfo;

FakeCommKnobs g_knobs;
std::atomic<int> g_live{0};

enum class Kind { AllReduce, AllGather, Broadcast, Reduce, ReduceScatter, AlltoAll, P2P };

struct P2PItem {
  bool isSend;
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t type;
  int peer;
};

struct Op {
  Kind kind = Kind::AllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  int redop = 0;  // 0..4, or 5: premultiplied sum with `scalar`
  double scalar = 1;
  int root = 0;
  std::vector<P2PItem> p2p;
};

struct Slot {
  std::vector<Op> ops;
  std::vector<bool> posted;
  int nPosted = 0;
  int nConsumed = 0;
  bool done = false;
};

struct World {
  int nranks = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, Slot> slots;
  bool aborted = false;
  int refs = 0;
};

struct FakeComm {
  World* world = nullptr;
  int rank = 0;
  uint64_t nextSeq = 0;
  std::map<int, double> premul;  // redop handle -> scalar
  int nextOp = 5;
};

std::mutex g_registryMu;
std::map<uint64_t, World*> g_registry;  // unique id -> world being joined
std::atomic<uint64_t> g_nextId{1};

double reduceValues(const Op& first, const std::vector<double>& in,
                    const std::vector<double>& scalars) {
  double acc = 0;
  for (size_t r = 0; r < in.size(); ++r) {
    double v = in[r];
    switch (first.redop) {
      case 0:
      case 4: acc = r == 0 ? v : acc + v; break;
      case 1: acc = r == 0 ? v : acc * v; break;
      case 2: acc = r == 0 ? v : std::max(acc, v); break;
      case 3: acc = r == 0 ? v : std::min(acc, v); break;
      default: acc = r == 0 ? v * scalars[r] : acc + v * scalars[r]; break;
    }
  }
  if (first.redop == 4) {
    double n = static_cast<double>(in.size());
    acc = typeInfo(first.type).isFloat ? acc / n : std::trunc(acc / n);
  }
  return acc;
}

// Runs one collective over every rank's op: reads all inputs, then writes all outputs.
void execute(World& w, std::vector<Op>& ops) {
  int n = w.nranks;
  const Op& f = ops[0];
  size_t elt = typeInfo(f.type).size;
  std::vector<std::vector<char>> out(n);
  auto bytes = [&](const void* p, size_t count) {
    const char* c = static_cast<const char*>(p);
    return std::vector<char>(c, c + count * elt);
  };
  std::vector<double> scalars(n);
  for (int r = 0; r < n; ++r) scalars[r] = ops[r].scalar;
  auto reduceAt = [&](size_t offset, std::vector<char>& dst, size_t count) {
    dst.resize(count * elt);
    std::vector<double> in(n);
    for (size_t i = 0; i < count; ++i) {
      for (int r = 0; r < n; ++r)
        in[r] = decodeValue(f.type, static_cast<const char*>(ops[r].send) + (offset + i) * elt);
      encodeValue(f.type, reduceValues(f, in, scalars), dst.data() + i * elt);
    }
  };
  switch (f.kind) {
    case Kind::AllReduce:
      for (int r = 0; r < n; ++r) reduceAt(0, out[r], f.count);
      break;
    case Kind::Reduce:
      reduceAt(0, out[f.root], f.count);
      break;
    case Kind::ReduceScatter:
      for (int r = 0; r < n; ++r) reduceAt(r * f.count, out[r], f.count);
      break;
    case Kind::Broadcast: {
      std::vector<char> src = bytes(ops[f.root].send, f.count);
      for (int r = 0; r < n; ++r) out[r] = src;
      break;
    }
    case Kind::AllGather:
      for (int q = 0; q < n; ++q)
        for (int r = 0; r < n; ++r) {
          std::vector<char> b = bytes(ops[r].send, f.count);
          out[q].insert(out[q].end(), b.begin(), b.end());
        }
      break;
    case Kind::AlltoAll:
      for (int q = 0; q < n; ++q)
        for (int p = 0; p < n; ++p) {
          std::vector<char> b = bytes(static_cast<const char*>(ops[p].send) + q * f.count * elt,
                                      f.count);
          out[q].insert(out[q].end(), b.begin(), b.end());
        }
      break;
    case Kind::P2P: {
      // Match each rank's sends to a peer with that peer's receives from it, in order.
      std::vector<std::pair<void*, std::vector<char>>> writes;
      for (int r = 0; r < n; ++r) {
        std::map<int, int> used;
        for (const P2PItem& rv : ops[r].p2p) {
          if (rv.isSend) continue;
          int k = used[rv.peer]++;
          for (const P2PItem& sd : ops[rv.peer].p2p) {
            if (!sd.isSend || sd.peer != r) continue;
            if (k-- > 0) continue;
            size_t e = typeInfo(sd.type).size;
            const char* c = static_cast<const char*>(sd.send);
            writes.emplace_back(rv.recv, std::vector<char>(c, c + sd.count * e));
            break;
          }
        }
      }
      for (auto& [dst, data] : writes) std::memcpy(dst, data.data(), data.size());
      return;
    }
  }
  for (int r = 0; r < n; ++r) {
    if (out[r].empty()) continue;
    std::memcpy(ops[r].recv, out[r].data(), out[r].size());
    if (r == g_knobs.corruptRank) {
      double v = decodeValue(f.type, ops[r].recv);
      encodeValue(f.type, v + 1, ops[r].recv);
    }
  }
}

ncclResult_t post(FakeComm* c, const Op& op, uint64_t& seq) {
  World& w = *c->world;
  std::unique_lock<std::mutex> lock(w.mu);
  if (c->rank == g_knobs.hangRank) {
    w.cv.wait(lock, [&] { return w.aborted; });
    return ncclRemoteError;
  }
  if (w.aborted) return ncclRemoteError;
  seq = c->nextSeq++;
  Slot& s = w.slots[seq];
  if (s.ops.empty()) {
    s.ops.resize(w.nranks);
    s.posted.assign(w.nranks, false);
  }
  s.ops[c->rank] = op;
  s.posted[c->rank] = true;
  if (++s.nPosted == w.nranks) {
    execute(w, s.ops);
    s.done = true;
    w.cv.notify_all();
  }
  return ncclSuccess;
}

ncclResult_t waitDone(FakeComm* c, uint64_t seq) {
  World& w = *c->world;
  std::unique_lock<std::mutex> lock(w.mu);
  bool ok = w.cv.wait_for(lock, std::chrono::seconds(20),
                          [&] { return w.slots[seq].done || w.aborted; });
  if (!ok || !w.slots[seq].done) return ncclRemoteError;
  if (++w.slots[seq].nConsumed == w.nranks) w.slots.erase(seq);
  return ncclSuccess;
}

// Calls between ncclGroupStart and ncclGroupEnd on this thread.
thread_local int t_depth = 0;
thread_local std::vector<std::pair<FakeComm*, Op>> t_queue;

ncclResult_t submit(ncclComm_t comm, const Op& op) {
  FakeComm* c = reinterpret_cast<FakeComm*>(comm);
  if (!c) return ncclInvalidArgument;
  if (t_depth > 0) {
    t_queue.emplace_back(c, op);
    return ncclSuccess;
  }
  uint64_t seq = 0;
  ncclResult_t rc = post(c, op, seq);
  return rc == ncclSuccess ? waitDone(c, seq) : rc;
}

ncclResult_t fakeGroupStart() {
  ++t_depth;
  return ncclSuccess;
}

ncclResult_t fakeGroupEnd() {
  if (t_depth == 0) return ncclInvalidUsage;
  if (--t_depth > 0) return ncclSuccess;
  std::vector<std::pair<FakeComm*, Op>> queue;
  queue.swap(t_queue);
  // Send/recv of one communicator inside the group form one point-to-point step.
  std::vector<std::pair<FakeComm*, Op>> merged;
  for (auto& [c, op] : queue) {
    if (op.kind == Kind::P2P) {
      auto it = std::find_if(merged.begin(), merged.end(), [&](auto& m) {
        return m.first == c && m.second.kind == Kind::P2P;
      });
      if (it != merged.end()) {
        it->second.p2p.insert(it->second.p2p.end(), op.p2p.begin(), op.p2p.end());
        continue;
      }
    }
    merged.emplace_back(c, op);
  }
  std::vector<std::pair<FakeComm*, uint64_t>> posted;
  ncclResult_t rc = ncclSuccess;
  for (auto& [c, op] : merged) {
    uint64_t seq = 0;
    rc = post(c, op, seq);
    if (rc != ncclSuccess) return rc;
    posted.emplace_back(c, seq);
  }
  for (auto& [c, seq] : posted)
    if ((rc = waitDone(c, seq)) != ncclSuccess) return rc;
  return ncclSuccess;
}

FakeComm* newComm(World* w, int rank) {
  ++g_live;
  w->refs++;
  FakeComm* c = new FakeComm;
  c->world = w;
  c->rank = rank;
  return c;
}

ncclResult_t fakeGetVersion(int* v) {
  *v = 22707;
  return ncclSuccess;
}

ncclResult_t fakeGetUniqueId(ncclUniqueId* id) {
  std::memset(id, 0, sizeof(*id));
  uint64_t v = g_nextId++;
  std::memcpy(id->internal, &v, sizeof(v));
  return ncclSuccess;
}

ncclResult_t fakeCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  uint64_t key;
  std::memcpy(&key, id.internal, sizeof(key));
  std::lock_guard<std::mutex> lock(g_registryMu);
  World*& w = g_registry[key];
  if (!w) {
    w = new World;
    w->nranks = nranks;
  }
  FakeComm* c = newComm(w, rank);
  *comm = reinterpret_cast<ncclComm_t>(c);
  return ncclSuccess;
}

ncclResult_t fakeCommInitAll(ncclComm_t* comms, int n, const int*) {
  World* w = new World;
  w->nranks = n;
  for (int r = 0; r < n; ++r) comms[r] = reinterpret_cast<ncclComm_t>(newComm(w, r));
  return ncclSuccess;
}

void release(FakeComm* c) {
  World* w = c->world;
  bool last;
  {
    std::lock_guard<std::mutex> lock(w->mu);
    last = --w->refs == 0;
  }
  if (last) {
    std::lock_guard<std::mutex> lock(g_registryMu);
    for (auto it = g_registry.begin(); it != g_registry.end(); ++it)
      if (it->second == w) {
        g_registry.erase(it);
        break;
      }
    delete w;
  }
  delete c;
  --g_live;
}

ncclResult_t fakeCommDestroy(ncclComm_t comm) {
  release(reinterpret_cast<FakeComm*>(comm));
  return ncclSuccess;
}

ncclResult_t fakeCommAbort(ncclComm_t comm) {
  FakeComm* c = reinterpret_cast<FakeComm*>(comm);
  {
    std::lock_guard<std::mutex> lock(c->world->mu);
    c->world->aborted = true;
    c->world->cv.notify_all();
  }
  // Threads may still be waking up inside calls on this world or communicator: both stay
  // allocated until the process exits (kept reachable, so leak checkers stay quiet), only the
  // live count drops.
  {
    // Never destroyed (a static vector would be, before the leak check runs at exit).
    static std::mutex graveyardMu;
    static auto* graveyard = new std::vector<std::unique_ptr<FakeComm>>;
    std::lock_guard<std::mutex> lock(graveyardMu);
    graveyard->emplace_back(c);
  }
  --g_live;
  return ncclSuccess;
}

ncclResult_t fakeCommCount(const ncclComm_t comm, int* n) {
  *n = reinterpret_cast<FakeComm*>(comm)->world->nranks;
  return ncclSuccess;
}

ncclResult_t fakeCommUserRank(const ncclComm_t comm, int* r) {
  *r = reinterpret_cast<FakeComm*>(comm)->rank;
  return ncclSuccess;
}

Op makeOp(Kind k, const void* s, void* r, size_t count, ncclDataType_t t, int redop, int root,
          ncclComm_t comm) {
  Op op;
  op.kind = k;
  op.send = s;
  op.recv = r;
  op.count = count;
  op.type = t;
  op.redop = redop;
  op.root = root;
  if (redop >= 5) {
    FakeComm* c = reinterpret_cast<FakeComm*>(comm);
    op.scalar = c->premul.count(redop) ? c->premul[redop] : 1;
  }
  return op;
}

ncclResult_t fakeAllReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t c, cudaStream_t) {
  return submit(c, makeOp(Kind::AllReduce, s, r, n, t, op, 0, c));
}
ncclResult_t fakeAllGather(const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t c,
                           cudaStream_t) {
  return submit(c, makeOp(Kind::AllGather, s, r, n, t, 0, 0, c));
}
ncclResult_t fakeReduceScatter(const void* s, void* r, size_t n, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t c, cudaStream_t) {
  return submit(c, makeOp(Kind::ReduceScatter, s, r, n, t, op, 0, c));
}
ncclResult_t fakeBroadcast(const void* s, void* r, size_t n, ncclDataType_t t, int root,
                           ncclComm_t c, cudaStream_t) {
  return submit(c, makeOp(Kind::Broadcast, s, r, n, t, 0, root, c));
}
ncclResult_t fakeReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                        int root, ncclComm_t c, cudaStream_t) {
  return submit(c, makeOp(Kind::Reduce, s, r, n, t, op, root, c));
}
ncclResult_t fakeAlltoAll(const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t c,
                          cudaStream_t) {
  return submit(c, makeOp(Kind::AlltoAll, s, r, n, t, 0, 0, c));
}
ncclResult_t fakeSend(const void* s, size_t n, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t) {
  Op op = makeOp(Kind::P2P, nullptr, nullptr, 0, t, 0, 0, c);
  op.p2p.push_back(P2PItem{true, s, nullptr, n, t, peer});
  return submit(c, op);
}
ncclResult_t fakeRecv(void* r, size_t n, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t) {
  Op op = makeOp(Kind::P2P, nullptr, nullptr, 0, t, 0, 0, c);
  op.p2p.push_back(P2PItem{false, nullptr, r, n, t, peer});
  return submit(c, op);
}
ncclResult_t fakePreMul(ncclRedOp_t* op, void* scalar, ncclDataType_t t, ncclScalarResidence_t,
                        ncclComm_t comm) {
  FakeComm* c = reinterpret_cast<FakeComm*>(comm);
  int handle = c->nextOp++;
  c->premul[handle] = decodeValue(t, scalar);
  *op = static_cast<ncclRedOp_t>(handle);
  return ncclSuccess;
}
ncclResult_t fakeRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  reinterpret_cast<FakeComm*>(comm)->premul.erase(op);
  return ncclSuccess;
}
const char* fakeErrorString(ncclResult_t rc) { return rc == ncclSuccess ? "no error" : "fake error"; }
const char* fakeLastError(ncclComm_t) { return ""; }
ncclResult_t fakeMemKind(ncclComm_t, ringccMemKind_t* kind) {
  *kind = g_knobs.cudaMemory ? ringccMemCuda : ringccMemHost;
  return ncclSuccess;
}

}  // namespace

bench::CommApi fakeCommApi(const FakeCommKnobs& knobs) {
  g_knobs = knobs;
  bench::CommApi a;
  a.getVersion = fakeGetVersion;
  a.getUniqueId = fakeGetUniqueId;
  a.commInitRank = fakeCommInitRank;
  a.commInitAll = fakeCommInitAll;
  a.commDestroy = fakeCommDestroy;
  a.commAbort = fakeCommAbort;
  a.commCount = fakeCommCount;
  a.commUserRank = fakeCommUserRank;
  a.groupStart = fakeGroupStart;
  a.groupEnd = fakeGroupEnd;
  a.allReduce = knobs.noAllReduce ? nullptr : fakeAllReduce;
  a.allGather = fakeAllGather;
  a.reduceScatter = fakeReduceScatter;
  a.broadcast = fakeBroadcast;
  a.reduce = fakeReduce;
  a.alltoAll = knobs.noAlltoAll ? nullptr : fakeAlltoAll;
  a.send = fakeSend;
  a.recv = fakeRecv;
  a.redOpCreatePreMulSum = fakePreMul;
  a.redOpDestroy = fakeRedOpDestroy;
  a.getErrorString = fakeErrorString;
  a.getLastError = fakeLastError;
  a.commMemoryKind = fakeMemKind;
  return a;
}

int fakeLiveComms() { return g_live.load(); }

}  // namespace ringcc::test
