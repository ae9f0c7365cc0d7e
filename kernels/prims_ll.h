// The LL protocol's part of the runner (kernels/prims.h), device-clean: how data and the
// sender's signature travel in LL lines, and how a receiver knows a slot is there.
//
// A slot is a row of LlLines (kernels/connector_device.h): 8 data bytes per 16-byte line, a
// flag beside each 4 of them. The sender writes each {data, flag} pair in one 8-byte store,
// flag = the slot's number + 1 (its epoch), so a reader that sees the flag sees the data; the
// receiver never reads tail, and needs no fence between the data and a counter. The first
// kLlSigLines lines carry the sender's OpSig, flagged like the data.
#pragma once

#include <stdint.h>

#include "kernels/connector_device.h"
#include "kernels/device_clean.h"
#include "kernels/device_ops.h"

namespace ringcc {

// Data bytes a slot of `llSlotBytes` carries (after the signature's lines).
RINGCC_INLINE uint32_t llSlotData(uint32_t llSlotBytes) {
  const uint32_t lines = llSlotBytes / kLlLineBytes;
  return lines > kLlSigLines ? (lines - kLlSigLines) * kLlLineData : 0;
}

// Most data bytes of one LL slice. Bounds the runner's LL staging buffers.
constexpr uint32_t kLlMaxSliceBytes = 8192;

RINGCC_INLINE uint64_t llLoadHalf(const uint32_t* p) { return ldVolatile64(p); }

RINGCC_INLINE void llStoreHalf(uint32_t* p, uint32_t data, uint32_t flag) {
  stVolatile64(p, (uint64_t)data | ((uint64_t)flag << 32));
}

// A line as one 16-byte load returned it carries `epoch` in both flags: both halves are there.
RINGCC_INLINE bool llLineReady(const Word4& l, uint32_t epoch) {
  return l.y == epoch && l.w == epoch;
}

// Every line holding one of `bytes` data bytes carries `epoch` in both flags.
RINGCC_HOST_DEVICE inline bool llReady(const LlLine* lines, uint32_t bytes, uint32_t epoch) {
  const uint32_t n = (bytes + kLlLineData - 1) / kLlLineData;
  for (uint32_t i = 0; i < n; i++) {
    if ((uint32_t)(llLoadHalf(&lines[i].data0) >> 32) != epoch) return false;
    if ((uint32_t)(llLoadHalf(&lines[i].data1) >> 32) != epoch) return false;
  }
  return true;
}

// Data bytes [from, from + bytes) of a slot's lines into dst (from is a multiple of 8; dst
// 4-byte aligned): whole lines as two 4-byte words, a partial last line byte by byte.
RINGCC_HOST_DEVICE inline void llUnpack(const LlLine* lines, uint64_t from, uint64_t bytes,
                                        char* dst) {
  const LlLine* l = &lines[from / kLlLineData];
  uint32_t* d = (uint32_t*)dst;
  const uint64_t whole = bytes / kLlLineData;
  for (uint64_t i = 0; i < whole; i++) {
    d[2 * i] = (uint32_t)llLoadHalf(&l[i].data0);
    d[2 * i + 1] = (uint32_t)llLoadHalf(&l[i].data1);
  }
  if (uint64_t rest = bytes - whole * kLlLineData) {
    uint32_t buf[2] = {(uint32_t)llLoadHalf(&l[whole].data0),
                       (uint32_t)llLoadHalf(&l[whole].data1)};
    __builtin_memcpy(dst + whole * kLlLineData, buf, rest);
  }
}

// src's `bytes` into the lines' data bytes [from, from + bytes), each flagged with `epoch`.
RINGCC_HOST_DEVICE inline void llPack(LlLine* lines, uint64_t from, uint64_t bytes,
                                      const char* src, uint32_t epoch) {
  LlLine* l = &lines[from / kLlLineData];
  const uint32_t* s = (const uint32_t*)src;
  const uint64_t whole = bytes / kLlLineData;
  for (uint64_t i = 0; i < whole; i++) {
    llStoreHalf(&l[i].data0, s[2 * i], epoch);
    llStoreHalf(&l[i].data1, s[2 * i + 1], epoch);
  }
  if (uint64_t rest = bytes - whole * kLlLineData) {
    uint32_t buf[2] = {0, 0};
    __builtin_memcpy(buf, src + whole * kLlLineData, rest);
    llStoreHalf(&l[whole].data0, buf[0], epoch);
    llStoreHalf(&l[whole].data1, buf[1], epoch);
  }
}

// The lines of the slot that counter value c names.
RINGCC_INLINE LlLine* llSlotLines(const ConnectorView& v, uint32_t c) {
  return (LlLine*)(v.llSlots + (size_t)(c & (v.nSlots - 1)) * v.llSlotBytes);
}

// The receive side of slot c: null while any line of its signature or of its `bytes` data
// bytes is not yet flagged with c + 1; else its data lines, and the sender's call in *sig.
RINGCC_HOST_DEVICE inline const LlLine* llReceive(const ConnectorView& v, uint32_t c,
                                                  uint32_t bytes, OpSig* sig) {
  const LlLine* lines = llSlotLines(v, c);
  if (!llReady(lines, bytes + (uint32_t)sizeof(OpSig), c + 1)) return nullptr;
  llUnpack(lines, 0, sizeof(OpSig), (char*)sig);
  return lines + kLlSigLines;
}

// The receive side of slot c when the block's threads poll the data lines themselves
// (ProgramRunner::reduceCopyBlock): false while a line of the signature is not yet flagged
// with c + 1, else the sender's call in *sig, each line read by one 16-byte load. Whoever fills
// a slot writes its signature with or after its data (a sender signs in publish, after its
// block's data lines; a network proxy copies whole slots), so a signed slot's data lines are
// on their way, needing nobody's further step: a receiver may commit to it and wait for them.
RINGCC_HOST_DEVICE inline bool llSigReady(const ConnectorView& v, uint32_t c, OpSig* sig) {
  const LlLine* lines = llSlotLines(v, c);
  uint32_t words[2 * kLlSigLines];
  for (uint32_t i = 0; i < kLlSigLines; i++) {
    const Word4 l = ldVolatile16(&lines[i]);
    if (!llLineReady(l, c + 1)) return false;
    words[2 * i] = l.x;
    words[2 * i + 1] = l.z;
  }
  __builtin_memcpy(sig, words, sizeof(OpSig));
  return true;
}

// The send side of slot c: where its data lines start.
RINGCC_INLINE LlLine* llSendData(const ConnectorView& v, uint32_t c) {
  return llSlotLines(v, c) + kLlSigLines;
}

// Signs slot c with the sender's call (before the counter that announces it moves).
RINGCC_HOST_DEVICE inline void llSign(const ConnectorView& v, uint32_t c, const OpSig& sig) {
  llPack(llSlotLines(v, c), 0, sizeof(OpSig), (const char*)&sig, c + 1);
}

}  // namespace ringcc
