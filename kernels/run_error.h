// Why a Program cannot run (device-clean): the runner's error codes (kernels/prims.h) and their
// text, which the engines put in their WARNs.
#pragma once

#include <stdint.h>

#include "kernels/device_clean.h"

namespace ringcc {

// Why a Program cannot run; decoded by runErrorText.
enum RunError : uint8_t {
  kRunOk = 0,
  kRunErrTables,        // program tables exceed their bounds
  kRunErrArgs,          // element size, slice or chunk of 0, or a slice of 2^31 bytes or more
  kRunErrNoConnection,  // a port has no connection
  kRunErrSlotsNotPow2,  // nSlots is not a power of two
  kRunErrSlotTooSmall,  // the protocol's slots are smaller than a slice
  kRunErrTooFewSlots,   // a ring chunk needs more slots than the connection has
  kRunErrNoLl,          // LL asked for, but the connection has no LL memory
  kRunErrSliceSize,     // a received Simple slot's size differs from the slice (mismatched calls)
  kRunErrRefKind,       // a slot holds a reference this side cannot read
  kRunErrRefRead,       // reading a reference from the peer's process failed
  kRunErrMismatch,      // the sender of a slot made another call than this rank (mismatch())
  kRunErrRing,          // the ring order table (RunArgs::ringRanks) is not the Program's
};

RINGCC_HOST_DEVICE inline const char* runErrorText(RunError e) {
  switch (e) {
    case kRunOk:
      return "no error";
    case kRunErrTables:
      return "program tables exceed their bounds";
    case kRunErrArgs:
      return "element, slice or chunk size is 0 or too large";
    case kRunErrNoConnection:
      return "a port has no connection";
    case kRunErrSlotsNotPow2:
      return "connection nSlots is not a power of two";
    case kRunErrSlotTooSmall:
      return "connection slots are smaller than a slice";
    case kRunErrTooFewSlots:
      return "connection has fewer slots than a ring chunk needs";
    case kRunErrNoLl:
      return "the LL protocol was chosen but the connection has no LL memory";
    case kRunErrSliceSize:
      return "received slot size differs from the step's slice (mismatched calls on the ranks)";
    case kRunErrRefKind:
      return "received a reference to the sender's memory that this side cannot read";
    case kRunErrRefRead:
      return "reading the sender's memory (process_vm_readv, or mapping its buffer) failed";
    case kRunErrMismatch:
      return "the ranks made different calls (collective, count, datatype, op or root)";
    case kRunErrRing:
      return "the ring order given to the runner is not the one its Program was built for";
  }
  return "unknown runner error";
}

}  // namespace ringcc
