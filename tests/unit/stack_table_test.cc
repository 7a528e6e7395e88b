// stack_table: entries keyed by (thread, tag, stack), their two counters,
// publication order and the cursor, drops and thread names -- through the
// public API only. The second counter is read by its place in Stack (a
// structured binding), not by its name.
#include "check.h"
#include "stack_table.h"

#include <stdio.h>
#include <sys/prctl.h>

#include <atomic>
#include <vector>

namespace {

struct Seen {
  std::vector<uint64_t> leaf, count, second;
  std::vector<uint32_t> depth, serial, tag, order;
  std::vector<int32_t> tid;
};

void collect(const stack_table::Stack& st, void* arg) {
  auto* s = static_cast<Seen*>(arg);
  auto [pcs, depth, tid, serial, count, second, tag, order] = st;
  s->leaf.push_back(pcs[0]), s->depth.push_back(depth), s->tid.push_back(tid), s->serial.push_back(serial);
  s->count.push_back(count), s->second.push_back(second), s->tag.push_back(tag), s->order.push_back(order);
}

Seen all(const stack_table::Table& t) {
  Seen s;
  t.for_each(collect, &s);
  return s;
}

stack_table::Table g_table;  // zero until map(), as the engines' are

bool fresh() {
  if (g_table.mapped()) g_table.unmap();
  std::string err;
  return g_table.map("test", &err) && err.empty();
}

}  // namespace

TEST(same_key_adds_up_in_one_entry) {
  CHECK(fresh());
  const uint64_t pcs[] = {0x1000, 0x2000, 0x3000};
  bool created = false;
  uint32_t ref = g_table.add(pcs, 3, 7, 1, 0, 1, 100, &created);
  CHECK(ref != 0);
  CHECK(created);
  CHECK_EQ(g_table.add(pcs, 3, 7, 1, 0, 2, 50, &created), ref);
  CHECK(!created);
  g_table.add_to(ref, 3, 25);
  Seen s = all(g_table);
  CHECK_EQ(s.count.size(), size_t(1));
  CHECK_EQ(s.count[0], uint64_t(6));
  CHECK_EQ(s.second[0], uint64_t(175));
  CHECK_EQ(s.depth[0], 3u);
  CHECK_EQ(s.leaf[0], uint64_t(0x1000));
  CHECK_EQ(s.tid[0], 7);
}

TEST(thread_tag_and_stack_each_make_a_new_entry_in_order) {
  CHECK(fresh());
  const uint64_t a[] = {0x10, 0x20}, b[] = {0x10, 0x21};
  g_table.add(a, 2, 1, 1, 0, 1, 1);
  g_table.add(a, 2, 2, 2, 0, 1, 1);  // another thread
  g_table.add(a, 2, 1, 1, 5, 1, 1);  // another tag (a wait's call)
  g_table.add(b, 2, 1, 1, 0, 1, 1);  // another stack
  g_table.add(a, 1, 1, 1, 0, 1, 1);  // a prefix is another stack
  Seen s = all(g_table);
  CHECK_EQ(s.order.size(), size_t(5));
  for (uint32_t i = 0; i < s.order.size(); ++i) CHECK_EQ(s.order[i], i);
  CHECK_EQ(s.serial[1], 2u);
  CHECK_EQ(s.tag[2], 5u);
  CHECK_EQ(s.depth[4], 1u);
}

TEST(cursor_sees_only_what_is_new) {
  CHECK(fresh());
  const uint64_t a[] = {1}, b[] = {2};
  uint64_t cursor = 0;
  g_table.add(a, 1, 1, 1, 0, 1, 1);
  Seen first;
  g_table.for_each_since(&cursor, collect, &first);
  CHECK_EQ(first.leaf.size(), size_t(1));
  g_table.add(a, 1, 1, 1, 0, 1, 1);  // an old entry grows: not new
  g_table.add(b, 1, 1, 1, 0, 1, 1);
  Seen second;
  g_table.for_each_since(&cursor, collect, &second);
  CHECK_EQ(second.leaf.size(), size_t(1));
  CHECK_EQ(second.leaf[0], uint64_t(2));
  CHECK_EQ(second.order[0], 1u);
  Seen none;
  g_table.for_each_since(&cursor, collect, &none);
  CHECK(none.leaf.empty());
}

TEST(drops_are_counted_and_a_map_is_fresh) {
  CHECK(fresh());
  g_table.drop(2, 30);
  g_table.drop(1, 12);
  CHECK_EQ(g_table.dropped(), uint64_t(3));
  CHECK_EQ(g_table.dropped_weight(), uint64_t(42));
  const uint64_t a[] = {1};
  g_table.add(a, 1, 1, 1, 0, 1, 1);
  CHECK(fresh());
  CHECK_EQ(g_table.dropped(), uint64_t(0));
  CHECK(all(g_table).leaf.empty());
}

// What the final stop does once its set is collected: a reader that
// comes after (a dlclose's) finds nothing, a late add() a zero page.
TEST(released_pages_read_as_an_empty_table) {
  CHECK(fresh());
  const uint64_t a[] = {1, 2}, b[] = {3};
  g_table.add(a, 2, 1, 1, 0, 1, 1);
  g_table.add(b, 1, 1, 1, 0, 1, 1);
  uint64_t cursor = 1;
  g_table.release_pages();
  CHECK(all(g_table).leaf.empty());
  Seen since;
  g_table.for_each_since(&cursor, collect, &since);
  CHECK(since.leaf.empty());
  CHECK(g_table.add(a, 2, 1, 1, 0, 1, 1) != 0);
  g_table.release_pages();
  CHECK(all(g_table).leaf.empty());
}

TEST(thread_names_by_serial) {
  CHECK(fresh());
  g_table.record_name(3, 42, "worker-with-a-long-name");
  CHECK_EQ(g_table.name(3), std::string("worker-with-a-l"));  // 15 bytes, as the kernel keeps them
  g_table.record_name(0, 1, "none");                         // serial 0 is no thread's
  CHECK_EQ(g_table.name(0), std::string());
  CHECK_EQ(g_table.name(4), std::string());
}

// A thread's new name is a new serial, so new entries for the same stacks:
// one that renames itself in a loop would fill the table every thread
// shares. Past a thousand renames in a table it keeps the serial it has.
TEST(renames_are_bounded) {
  CHECK(fresh());
  std::atomic<uint32_t> serials{0};
  uint32_t serial = 0;
  char was[16] = {0};
  prctl(PR_GET_NAME, was, 0, 0, 0);
  uint32_t first = g_table.serial_now(&serial, &serials, 7);
  CHECK(first != 0);
  CHECK_EQ(g_table.serial_now(&serial, &serials, 7), first);  // the same name: the same serial
  uint32_t last = first, changes = 0;
  for (int i = 0; i < 3000; ++i) {
    char name[16];
    snprintf(name, sizeof name, "task-%d", i);
    prctl(PR_SET_NAME, name, 0, 0, 0);
    uint32_t now = g_table.serial_now(&serial, &serials, 7);
    if (now != last) ++changes, last = now;
  }
  prctl(PR_SET_NAME, was, 0, 0, 0);
  CHECK(changes >= 1000 && changes <= 1024);
  CHECK_EQ(g_table.name(first), std::string(was));
  // What it went on under keeps the name it had when it took that serial.
  CHECK(g_table.name(last).rfind("task-", 0) == 0);
}
