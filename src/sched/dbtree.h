// Double binary trees: the shape of NCCL's tree algorithm. Pure, the same on every rank.
//
// Across hosts, two binary trees over the host indices 0..H-1 in which a host with children in
// one tree is a leaf in the other, so that both trees together use every host's links in both
// directions about equally (NCCL's "double binary tree"). Tree 0 is an in-order binary tree
// rooted at host 0 (below, H = 14); tree 1 is tree 0 mirrored (h -> H-1-h) for an even H and
// shifted by one (h -> h+1 mod H) for an odd H:
//
//   0---------------8
//            ______/ \______
//           4               12
//         /   \            /  |
//       2       6       10    |
//      / \     / \     /  \   |
//     1   3   5   7   9   11  13
//
// Host h's position p has lowest set bit b: its parent is p with b cleared and the next bit
// set (or just cleared when that is out of range), its children p - b/2 and the highest p + b/2^k
// within range. Odd positions are leaves; the mirror (even H) or the shift (odd H) maps odd
// positions of one tree to even positions of the other, so every host is inner in at most one
// tree, except for an odd H, where host 0 (the root of tree 0) has children in both, because
// (H+1)/2 positions of each tree are inner and two trees need H+1 of them.
//
// Inside a host, ranks form a chain in the given order: the first rank (the host's head) links
// to the head of its parent host and the heads of its child hosts, and every other rank hangs
// below the previous one. So a rank has at most three children: two child hosts and the next
// rank of its chain (NCCL's NCCL_MAX_TREE_ARITY is 3 for the same reason).
#pragma once

#include <string>
#include <vector>

#include "nccl.h"

namespace ringcc {

struct TreeNode {
  int up = -1;                 // parent rank; -1 at the root
  int down[3] = {-1, -1, -1};  // child ranks; -1: none. Filled from down[0] without gaps
};

struct DoubleTree {
  std::vector<TreeNode> tree[2];  // indexed by rank
};

// The trees over `hosts`: hosts[h] lists host h's ranks in chain order, the first being the
// host's node in the inter-host trees. Every rank 0..n-1 must appear exactly once (n = the total
// number of ranks listed), and no host may be empty; otherwise ncclInvalidArgument.
ncclResult_t buildDoubleTree(const std::vector<std::vector<int>>& hosts, DoubleTree* out);

// The parent and children of position `pos` in tree 0's in-order binary tree of `n` positions
// (the picture above): the host-level shape, exposed for the tests.
TreeNode binaryTreePosition(int n, int pos);

// NCCL's log form of `rank`'s place in both trees: "[0] d0/d1/d2->rank->up [1] ...".
std::string describeTree(const DoubleTree& t, int rank);

}  // namespace ringcc
