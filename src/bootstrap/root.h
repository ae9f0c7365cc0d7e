// The root of one rendezvous: a thread that collects every rank's hello and answers each with
// the table of all ranks' listen addresses.
//
// Promises:
//   - It never trusts a connection: one without the magic, or silent for BOOTSTRAP_TIMEOUT,
//     or sending bytes it should not, is dropped and logged at WARN; connections are served
//     side by side (poll), so a stalled client cannot hold up the others.
//   - Ranks are checked: same nranks as the first, rank in range, each rank once (a rank whose
//     connection closes before the rendezvous completes frees its slot). A rejected rank gets
//     a RootReply saying why before it is closed.
//   - It ends: when the table has been sent to all nranks ranks (a single-use root, the one of a
//     grow id, stays 10 x BOOTSTRAP_TIMEOUT longer, refusing every later hello with
//     kIdConsumed, so that a second use of its id fails at once naming the cause); when
//     BOOTSTRAP_TIMEOUT passes
//     without a new rank after the first one came (the waiting ranks are told kRootTimeout);
//     when no rank at all came within 10 x BOOTSTRAP_TIMEOUT; or at process exit.
//   - Threads are owned by a process-wide registry that joins finished ones whenever a new root
//     starts and stops the rest at exit, so neither a thread per call leaks nor does a root
//     keep the process alive. A forked child forgets (and closes) its parent's roots.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl.h"
#include "src/bootstrap/socket.h"

namespace ringcc {

// Serves rendezvous `magic` on `listener` (bound and listening) from a new thread. A
// `singleUse` root refuses hellos after its rendezvous completed (see above).
ncclResult_t startRoot(Socket listener, uint64_t magic, bool singleUse = false);

// Binds `addr` (retrying while the address is still in use, within BOOTSTRAP_TIMEOUT) and
// serves rendezvous `magic` there: the NCCL_COMM_ID root.
ncclResult_t startRootAt(const SocketAddress& addr, uint64_t magic);

// Roots of this process whose thread is still running (tests check that roots end).
size_t runningRoots();

}  // namespace ringcc
