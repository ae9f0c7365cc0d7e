#include "src/sched/dbtree.h"

#include <cstdio>

#include "src/base/error.h"

namespace ringcc {
namespace {

constexpr const char* kWhere = "double binary tree";

void addChild(TreeNode* node, int child) {
  for (int& d : node->down) {
    if (d < 0) {
      d = child;
      return;
    }
  }
}

// Host h's node in tree `which` of H hosts, as host indices.
TreeNode hostNode(int H, int which, int h) {
  if (which == 0) return binaryTreePosition(H, h);
  // Tree 1 is tree 0 with positions renamed: mirrored for an even H, shifted for an odd H.
  auto toPos = [H](int host) { return H % 2 == 0 ? H - 1 - host : (host - 1 + H) % H; };
  auto toHost = [H](int pos) { return pos < 0 ? -1 : H % 2 == 0 ? H - 1 - pos : (pos + 1) % H; };
  TreeNode p = binaryTreePosition(H, toPos(h));
  TreeNode n;
  n.up = toHost(p.up);
  for (int i = 0; i < 3; ++i) n.down[i] = toHost(p.down[i]);
  return n;
}

}  // namespace

TreeNode binaryTreePosition(int n, int pos) {
  TreeNode node;
  if (n <= 1) return node;
  if (pos == 0) {
    // The root's only child is the largest power of two below n.
    int child = 1;
    while (child * 2 < n) child *= 2;
    node.down[0] = child;
    return node;
  }
  const int bit = pos & -pos;  // lowest set bit: the height of pos in the tree
  node.up = (pos ^ bit) | (bit << 1);
  if (node.up >= n) node.up = pos ^ bit;
  const int half = bit >> 1;
  if (half == 0) return node;  // odd positions are leaves
  node.down[0] = pos - half;   // always in range: it is below pos
  for (int k = half; k > 0; k >>= 1) {
    if (pos + k < n) {
      node.down[1] = pos + k;
      break;
    }
  }
  return node;
}

ncclResult_t buildDoubleTree(const std::vector<std::vector<int>>& hosts, DoubleTree* out) {
  size_t n = 0;
  for (size_t h = 0; h < hosts.size(); ++h) {
    if (hosts[h].empty()) return fail(ncclInvalidArgument, kWhere, "host %zu has no ranks", h);
    n += hosts[h].size();
  }
  if (n == 0) return fail(ncclInvalidArgument, kWhere, "no hosts");
  std::vector<bool> seen(n, false);
  for (const auto& ranks : hosts) {
    for (int r : ranks) {
      if (r < 0 || (size_t)r >= n || seen[r])
        return fail(ncclInvalidArgument, kWhere, "rank %d is out of 0..%zu or listed twice", r,
                    n - 1);
      seen[r] = true;
    }
  }
  const int H = (int)hosts.size();
  for (int which = 0; which < 2; ++which) {
    std::vector<TreeNode>& tree = out->tree[which];
    tree.assign(n, TreeNode{});
    for (int h = 0; h < H; ++h) {
      const std::vector<int>& chain = hosts[h];
      TreeNode hn = hostNode(H, which, h);
      TreeNode& head = tree[chain[0]];
      if (hn.up >= 0) head.up = hosts[hn.up][0];
      for (int child : hn.down)
        if (child >= 0) addChild(&head, hosts[child][0]);
      for (size_t i = 1; i < chain.size(); ++i) {
        tree[chain[i]].up = chain[i - 1];
        addChild(&tree[chain[i - 1]], chain[i]);
      }
    }
  }
  return ncclSuccess;
}

std::string describeTree(const DoubleTree& t, int rank) {
  std::string text;
  for (int which = 0; which < 2; ++which) {
    const TreeNode& node = t.tree[which][rank];
    char part[96];
    snprintf(part, sizeof part, "%s[%d] %d/%d/%d->%d->%d", which ? " " : "", which, node.down[0],
             node.down[1], node.down[2], rank, node.up);
    text += part;
  }
  return text;
}

}  // namespace ringcc
