#include <catch2/catch.hpp>
#include <algorithm>

#include "src/sched/dbtree.h"

using namespace ringcc;

namespace {

int childCount(const TreeNode& n) {
  int c = 0;
  for (int d : n.down) c += d >= 0;
  return c;
}

// Checks that `tree` over n ranks is one tree: one root, every other rank has a parent that
// lists it as a child, children fill down[] from the front, and every rank reaches the root.
void checkIsTree(const std::vector<TreeNode>& tree) {
  const int n = (int)tree.size();
  int roots = 0;
  for (int r = 0; r < n; ++r) {
    const TreeNode& node = tree[r];
    if (node.up < 0) {
      ++roots;
    } else {
      REQUIRE(node.up < n);
      const TreeNode& parent = tree[node.up];
      CHECK(std::count(parent.down, parent.down + 3, r) == 1);
    }
    bool gap = false;
    for (int d : node.down) {
      if (d < 0)
        gap = true;
      else {
        CHECK_FALSE(gap);
        REQUIRE(d < n);
        CHECK(tree[d].up == r);
      }
    }
    int hops = 0, at = r;
    while (tree[at].up >= 0 && hops <= n) at = tree[at].up, ++hops;
    CHECK(hops <= n);  // no cycle
  }
  CHECK(roots == 1);
}

std::vector<std::vector<int>> oneRankPerHost(int n) {
  std::vector<std::vector<int>> hosts(n);
  for (int r = 0; r < n; ++r) hosts[r] = {r};
  return hosts;
}

}  // namespace

TEST_CASE("the binary tree of positions matches the picture", "[dbtree]") {
  // n = 14: 0 -> 8; 8 -> 4, 12; 4 -> 2, 6; 12 -> 10, 13; 2 -> 1, 3; 13 is a leaf under 12.
  CHECK(binaryTreePosition(14, 0).down[0] == 8);
  CHECK(binaryTreePosition(14, 0).up == -1);
  CHECK(binaryTreePosition(14, 8).up == 0);
  CHECK(binaryTreePosition(14, 8).down[0] == 4);
  CHECK(binaryTreePosition(14, 8).down[1] == 12);
  CHECK(binaryTreePosition(14, 12).down[0] == 10);
  CHECK(binaryTreePosition(14, 12).down[1] == 13);
  CHECK(binaryTreePosition(14, 13).up == 12);
  CHECK(binaryTreePosition(14, 2).down[1] == 3);
  CHECK(childCount(binaryTreePosition(14, 7)) == 0);
  CHECK(childCount(binaryTreePosition(1, 0)) == 0);
}

TEST_CASE("double binary trees: two trees, each host inner in at most one", "[dbtree]") {
  for (int n = 1; n <= 300; n += (n < 40 ? 1 : 37)) {
    DoubleTree t;
    REQUIRE(buildDoubleTree(oneRankPerHost(n), &t) == ncclSuccess);
    checkIsTree(t.tree[0]);
    checkIsTree(t.tree[1]);
    int innerInBoth = 0;
    for (int r = 0; r < n; ++r) {
      CHECK(childCount(t.tree[0][r]) <= 2);
      CHECK(childCount(t.tree[1][r]) <= 2);
      if (childCount(t.tree[0][r]) > 0 && childCount(t.tree[1][r]) > 0) {
        ++innerInBoth;
        // Only for an odd count, and only rank 0, tree 0's root (see dbtree.h).
        CHECK(n % 2 == 1);
        CHECK(r == 0);
      }
    }
    CHECK(innerInBoth <= 1);
    if (n > 1) CHECK(t.tree[0][0].up == -1);
    // The two roots differ, so the two trees load different links at the top.
    if (n > 1) {
      int root1 = -1;
      for (int r = 0; r < n; ++r)
        if (t.tree[1][r].up < 0) root1 = r;
      CHECK(root1 != 0);
    }
  }
}

TEST_CASE("double binary trees chain the ranks of a host below its head", "[dbtree]") {
  // 3 hosts of 4 ranks, chains in a non-trivial order.
  std::vector<std::vector<int>> hosts = {{0, 1, 2, 3}, {7, 6, 5, 4}, {8, 10, 9, 11}};
  DoubleTree t;
  REQUIRE(buildDoubleTree(hosts, &t) == ncclSuccess);
  for (int which = 0; which < 2; ++which) {
    checkIsTree(t.tree[which]);
    for (const auto& chain : hosts) {
      for (size_t i = 1; i < chain.size(); ++i) CHECK(t.tree[which][chain[i]].up == chain[i - 1]);
      CHECK(childCount(t.tree[which][chain.back()]) == 0);
      // A head's parent, if any, is another host's head.
      int up = t.tree[which][chain[0]].up;
      if (up >= 0) {
        bool isHead = false;
        for (const auto& other : hosts) isHead |= other[0] == up;
        CHECK(isHead);
      }
    }
  }
  // Host heads: 0, 7, 8 -> host-level tree of 3 (odd: tree 1 is tree 0 shifted by one host).
  CHECK(t.tree[0][0].up == -1);
  CHECK(t.tree[1][0].up != -1);
  CHECK(describeTree(t, 0).rfind("[0] ", 0) == 0);
}

TEST_CASE("double binary trees refuse bad host lists", "[dbtree]") {
  DoubleTree t;
  CHECK(buildDoubleTree({}, &t) == ncclInvalidArgument);
  CHECK(buildDoubleTree({{0}, {}}, &t) == ncclInvalidArgument);
  CHECK(buildDoubleTree({{0, 1}, {1}}, &t) == ncclInvalidArgument);
  CHECK(buildDoubleTree({{0, 5}}, &t) == ncclInvalidArgument);
}
