#include "src/bootstrap/sub_group.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "src/base/error.h"
#include "src/base/log.h"
#include "src/bootstrap/unique_id.h"

namespace ringcc {
namespace {

constexpr int kTagSubGroup = kBootstrapReservedTag - 1;

struct SubGroupInvite {
  ncclUniqueId id;
  uint64_t membersHash;
  int32_t nmembers;
  int32_t reserved;
};

// FNV-1a over the member list: equal lists give equal fingerprints.
uint64_t fingerprint(const std::vector<int>& members) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int m : members) {
    for (int b = 0; b < 4; ++b) {
      h ^= static_cast<uint64_t>((static_cast<uint32_t>(m) >> (8 * b)) & 0xff);
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

}  // namespace

std::vector<int> splitMembers(const std::vector<int>& colors, const std::vector<int>& keys,
                              int rank) {
  std::vector<int> members;
  if (colors[rank] == NCCL_SPLIT_NOCOLOR) return members;
  for (int r = 0; r < static_cast<int>(colors.size()); ++r)
    if (colors[r] == colors[rank]) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return keys[a] < keys[b]; });
  return members;
}

ncclResult_t bootstrapSubGroup(Bootstrap& parent, const std::vector<int>& members,
                               const std::atomic<bool>* abortFlag,
                               std::unique_ptr<Bootstrap>* out) {
  if (out == nullptr) return fail(ncclInvalidArgument, "bootstrapSubGroup", "out is NULL");
  const int n = static_cast<int>(members.size());
  int newRank = -1;
  std::vector<bool> seen(parent.nranks(), false);
  for (int i = 0; i < n; ++i) {
    int m = members[i];
    if (m < 0 || m >= parent.nranks() || seen[m])
      return fail(ncclInvalidArgument, "bootstrapSubGroup",
                  "members[%d]=%d is out of range [0, %d) or repeated", i, m, parent.nranks());
    seen[m] = true;
    if (m == parent.rank()) newRank = i;
  }
  if (newRank < 0)
    return fail(ncclInvalidArgument, "bootstrapSubGroup",
                "members does not include the calling rank %d", parent.rank());

  SubGroupInvite invite{};
  const uint64_t hash = fingerprint(members);
  if (newRank == 0) {
    RINGCC_CHECK(bootstrapNewRoot(&invite.id));
    invite.membersHash = hash;
    invite.nmembers = n;
    for (int i = 1; i < n; ++i)
      RINGCC_CHECK(parent.send(members[i], kTagSubGroup, &invite, sizeof(invite)));
  } else {
    RINGCC_CHECK(parent.recv(members[0], kTagSubGroup, &invite, sizeof(invite)));
    if (invite.membersHash != hash || invite.nmembers != n)
      return fail(ncclInvalidUsage, "bootstrapSubGroup",
                  "rank %d's member list (%d ranks) differs from the leader rank %d's (%d ranks)",
                  parent.rank(), n, members[0], invite.nmembers);
  }
  return Bootstrap::create(invite.id, newRank, n, abortFlag, out);
}

ncclResult_t bootstrapSplit(Bootstrap& parent, int color, int key,
                            const std::atomic<bool>* abortFlag, std::unique_ptr<Bootstrap>* out) {
  if (out == nullptr) return fail(ncclInvalidArgument, "bootstrapSplit", "out is NULL");
  out->reset();
  // A bad color still takes part in the allGather (as NOCOLOR), so the others are not left
  // waiting; only this rank reports the error.
  const bool badColor = color < NCCL_SPLIT_NOCOLOR;
  const int n = parent.nranks();
  std::vector<int> table(2 * n);
  table[2 * parent.rank()] = badColor ? NCCL_SPLIT_NOCOLOR : color;
  table[2 * parent.rank() + 1] = key;
  RINGCC_CHECK(parent.allGather(table.data(), 2 * sizeof(int)));
  if (badColor)
    return fail(ncclInvalidArgument, "bootstrapSplit",
                "color %d is negative (and not "
                "NCCL_SPLIT_NOCOLOR)",
                color);
  std::vector<int> colors(n), keys(n);
  for (int r = 0; r < n; ++r) {
    colors[r] = table[2 * r];
    keys[r] = table[2 * r + 1];
  }
  std::vector<int> members = splitMembers(colors, keys, parent.rank());
  if (members.empty()) return ncclSuccess;
  return bootstrapSubGroup(parent, members, abortFlag, out);
}

}  // namespace ringcc
