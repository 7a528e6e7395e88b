// config: CONTRACT.md's slug examples, strict parsing, and the heap rate rounding.
#include "check.h"
#include "config.h"

#include <signal.h>

#include <map>

namespace {
std::map<std::string, std::string> g_env;
const char* get(const char* n) {
  auto it = g_env.find(n);
  return it == g_env.end() ? nullptr : it->second.c_str();
}
std::string parse_with(std::map<std::string, std::string> env, config::Config* c) {
  g_env = std::move(env);
  return config::parse(get, c);
}
}  // namespace

TEST(slug_spec_examples) {
  CHECK_EQ(config::slug("288w-6writers"), std::string("288w-6writers"));
  CHECK_EQ(config::slug("../../etc"), std::string("etc"));
  CHECK_EQ(config::slug("a b/c"), std::string("a-b-c"));
  CHECK_EQ(config::slug(".."), std::string("run"));
  CHECK_EQ(config::slug(""), std::string("run"));
}

TEST(slug_runs_and_leading_and_length) {
  CHECK_EQ(config::slug("a  //  b"), std::string("a-b"));
  CHECK_EQ(config::slug("_-.x"), std::string("x"));
  CHECK_EQ(config::slug("x\xc3\xa9y"), std::string("x-y"));
  CHECK_EQ(config::slug("/abs/path"), std::string("abs-path"));
  CHECK_EQ(config::slug(std::string(300, 'a')).size(), size_t(128));
  CHECK_EQ(config::slug("a.b_c-d"), std::string("a.b_c-d"));
}

TEST(inert_when_dir_unset_or_empty) {
  config::Config c;
  CHECK_EQ(parse_with({}, &c), std::string());
  CHECK(!c.active);
  CHECK_EQ(parse_with({{"PROFILE_DIR", ""}, {"PROFILE_CPU_HZ", "junk"}}, &c), std::string());
  CHECK(!c.active);
}

TEST(defaults) {
  config::Config c;
  CHECK_EQ(parse_with({{"PROFILE_DIR", "/tmp/p"}}, &c), std::string());
  CHECK(c.active);
  CHECK_EQ(c.name, std::string("run"));
  CHECK_EQ(c.cpu_hz, 100u);
  CHECK_EQ(c.heap_sample, uint64_t(524288));
  CHECK_EQ(c.heap_lg_sample, 19u);
  CHECK_EQ(c.stop_timeout_ms, uint64_t(10000));
}

TEST(valid_values) {
  config::Config c;
  CHECK_EQ(parse_with({{"PROFILE_DIR", "d"}, {"PROFILE_NAME", "a b"}, {"PROFILE_CPU_HZ", "0"},
                       {"PROFILE_HEAP_SAMPLE", "32768"}, {"PROFILE_STOP_TIMEOUT", "2.5"}},
                      &c),
           std::string());
  CHECK_EQ(c.name, std::string("a-b"));
  CHECK_EQ(c.cpu_hz, 0u);
  CHECK_EQ(c.heap_lg_sample, 15u);
  CHECK_EQ(c.stop_timeout_ms, uint64_t(2500));
  CHECK_EQ(parse_with({{"PROFILE_DIR", "d"}, {"PROFILE_CPU_HZ", "10000"}, {"PROFILE_HEAP_SAMPLE", "0"}}, &c),
           std::string());
  CHECK_EQ(c.heap_sample, uint64_t(0));
}

TEST(malformed_values_are_errors) {
  const char* bad_hz[] = {"", "abc", "-5", "+5", " 5", "5 ", "10x", "1e3", "10001", "99999999999999999999"};
  for (const char* v : bad_hz) {
    config::Config c;
    std::string err = parse_with({{"PROFILE_DIR", "d"}, {"PROFILE_CPU_HZ", v}}, &c);
    CHECK(err.find("PROFILE_CPU_HZ") != std::string::npos);
  }
  const char* bad_heap[] = {"", "1k", "-1", "0x100", "1099511627777"};
  for (const char* v : bad_heap) {
    config::Config c;
    CHECK(!parse_with({{"PROFILE_DIR", "d"}, {"PROFILE_HEAP_SAMPLE", v}}, &c).empty());
  }
  const char* bad_timeout[] = {"", "0", "0.05", "1.2345", "-1", "3601", "1.", "abc"};
  for (const char* v : bad_timeout) {
    config::Config c;
    CHECK(!parse_with({{"PROFILE_DIR", "d"}, {"PROFILE_STOP_TIMEOUT", v}}, &c).empty());
  }
}

TEST(heap_rate_rounds_to_nearest_power_of_two) {
  CHECK_EQ(config::lg_for_sample(524288), 19u);
  CHECK_EQ(config::lg_for_sample(500000), 19u);
  CHECK_EQ(config::lg_for_sample(1000000), 20u);  // log2 = 19.93
  CHECK_EQ(config::lg_for_sample(370000), 18u);   // log2 = 18.50 - a hair
  CHECK_EQ(config::lg_for_sample(1), 0u);
  CHECK_EQ(config::lg_for_sample(2), 1u);
  CHECK_EQ(config::lg_for_sample(3), 2u);                     // 2^1.5 = 2.83
  CHECK_EQ(config::lg_for_sample(370727), 18u);               // 2^18.5 = 370727.6
  CHECK_EQ(config::lg_for_sample(370728), 19u);
  CHECK_EQ(config::lg_for_sample(3037000499ull), 31u);        // 2^31.5 = 3037000499.98
  CHECK_EQ(config::lg_for_sample(3037000500ull), 32u);
  CHECK_EQ(config::lg_for_sample(uint64_t(1) << 62), 62u);
  CHECK_EQ(config::lg_for_sample(~uint64_t(0)), 62u);         // jemalloc's limit
}

TEST(unknown_profile_variables_are_named) {
  const char* env[] = {"PATH=/bin", "PROFILE_DIR=/tmp/p", "PROFILE_CPU_HERTZ=1000", "PROFILE_NAME=x",
                       "PROFILE_HEAP=1", "PROFILER=y", "XPROFILE_A=1", nullptr};
  CHECK_EQ(config::unknown_vars(env), std::string("PROFILE_CPU_HERTZ, PROFILE_HEAP"));
  const char* clean[] = {"PROFILE_DIR=/tmp/p", "PROFILE_STOP_TIMEOUT=2", nullptr};
  CHECK_EQ(config::unknown_vars(clean), std::string());
}

TEST(running_variables_defaults_and_values) {
  config::Config c;
  CHECK_EQ(parse_with({{"PROFILE_DIR", "d"}}, &c), std::string());
  CHECK_EQ(c.peak_floor, uint64_t(64) << 20);
  CHECK_EQ(c.peak_after_ms, uint64_t(10000));
  CHECK_EQ(c.interval_ms, uint64_t(0));
  CHECK_EQ(c.snapshot_signal, 0);
  CHECK(!c.snapshot_trigger);
  CHECK_EQ(c.snapshot_keep, 10u);
  CHECK_EQ(c.mem_millihz, uint64_t(0));
  CHECK_EQ(parse_with({{"PROFILE_DIR", "d"}, {"PROFILE_PEAK_FLOOR", "256M"}, {"PROFILE_PEAK_AFTER", "2.5"},
                       {"PROFILE_INTERVAL", "1.5m"}, {"PROFILE_SNAPSHOT_SIGNAL", "SIGUSR2"},
                       {"PROFILE_SNAPSHOT_TRIGGER", "1"}, {"PROFILE_SNAPSHOT_KEEP", "3"}, {"PROFILE_MEM_HZ", "0.1"}},
                      &c),
           std::string());
  CHECK_EQ(c.peak_floor, uint64_t(256) << 20);
  CHECK_EQ(c.peak_after_ms, uint64_t(2500));
  CHECK_EQ(c.interval_ms, uint64_t(90000));
  CHECK_EQ(c.snapshot_signal, SIGUSR2);
  CHECK(c.snapshot_trigger);
  CHECK_EQ(c.snapshot_keep, 3u);
  CHECK_EQ(c.mem_millihz, uint64_t(100));
  CHECK_EQ(parse_with({{"PROFILE_DIR", "d"}, {"PROFILE_PEAK_FLOOR", "0"}, {"PROFILE_INTERVAL", "0"},
                       {"PROFILE_SNAPSHOT_SIGNAL", "0"}}, &c),
           std::string());
  CHECK_EQ(c.peak_floor, uint64_t(0));
  CHECK_EQ(c.interval_ms, uint64_t(0));
  CHECK_EQ(c.snapshot_signal, 0);
  const char* durations[][2] = {{"500ms", ""}, {"1000ms", "1000"}, {"30s", "30000"}, {"5m", "300000"},
                                {"1h", "3600000"}, {"2d", "172800000"}, {"30d", "2592000000"}};
  for (auto& d : durations) {
    std::string err = parse_with({{"PROFILE_DIR", "d"}, {"PROFILE_INTERVAL", d[0]}}, &c);
    if (!*d[1]) {
      CHECK(!err.empty());
    } else {
      CHECK_EQ(err, std::string());
      CHECK_EQ(c.interval_ms, uint64_t(std::stoull(d[1])));
    }
  }
}

TEST(running_variables_malformed) {
  const char* bad[][2] = {{"PROFILE_INTERVAL", "30"},        {"PROFILE_INTERVAL", "5x"},
                          {"PROFILE_INTERVAL", "31d"},       {"PROFILE_INTERVAL", "s"},
                          {"PROFILE_INTERVAL", "-1s"},       {"PROFILE_INTERVAL", ""},
                          {"PROFILE_SNAPSHOT_KEEP", "0"},    {"PROFILE_SNAPSHOT_KEEP", "100001"},
                          {"PROFILE_SNAPSHOT_KEEP", "2 "},   {"PROFILE_SNAPSHOT_SIGNAL", "USR3"},
                          {"PROFILE_SNAPSHOT_SIGNAL", "KILL"}, {"PROFILE_SNAPSHOT_SIGNAL", "SEGV"},
                          {"PROFILE_SNAPSHOT_SIGNAL", "CHLD"}, {"PROFILE_SNAPSHOT_SIGNAL", "usr2"},
                          {"PROFILE_SNAPSHOT_SIGNAL", "12"},  {"PROFILE_SNAPSHOT_SIGNAL", "RTMAX-4"},
                          {"PROFILE_SNAPSHOT_SIGNAL", "RTMIN+99"}, {"PROFILE_SNAPSHOT_SIGNAL", ""},
                          {"PROFILE_SNAPSHOT_TRIGGER", "yes"}, {"PROFILE_SNAPSHOT_TRIGGER", ""},
                          {"PROFILE_MEM_HZ", "101"},         {"PROFILE_MEM_HZ", "0.0001"},
                          {"PROFILE_PEAK_FLOOR", "64MB"},    {"PROFILE_PEAK_FLOOR", "-1"},
                          {"PROFILE_PEAK_FLOOR", "M"},       {"PROFILE_PEAK_AFTER", "86401"},
                          {"PROFILE_PEAK_AFTER", "1s"}};
  for (auto& b : bad) {
    config::Config c;
    std::string err = parse_with({{"PROFILE_DIR", "d"}, {b[0], b[1]}}, &c);
    CHECK(err.find(b[0]) != std::string::npos);
  }
}

TEST(snapshot_signal_names) {
  CHECK_EQ(config::snapshot_signal_number("USR2"), SIGUSR2);
  CHECK_EQ(config::snapshot_signal_number("SIGHUP"), SIGHUP);
  CHECK_EQ(config::snapshot_signal_number("RTMIN"), SIGRTMIN);
  CHECK_EQ(config::snapshot_signal_number("RTMIN+3"), SIGRTMIN + 3);
  CHECK_EQ(config::snapshot_signal_number("RTMAX-1"), SIGRTMAX - 1);
  CHECK_EQ(config::snapshot_signal_number("RTMAX-4"), 0);  // the shim's own
  CHECK_EQ(config::snapshot_signal_number("RTMIN-1"), 0);
  CHECK_EQ(config::snapshot_signal_number("ABRT"), 0);
}

TEST(process_tree_variables) {
  config::Config c;
  CHECK_EQ(parse_with({{"PROFILE_DIR", "d"}}, &c), std::string());
  CHECK(c.log.empty() && c.only.empty());
  CHECK_EQ(parse_with({{"PROFILE_DIR", "d"}, {"PROFILE_LOG", "profshim.log"}, {"PROFILE_ONLY", "python3,cc1plus"}}, &c),
           std::string());
  CHECK_EQ(c.log, std::string("profshim.log"));
  CHECK(config::only_lists(c.only, "python3") && config::only_lists(c.only, "cc1plus"));
  CHECK(!config::only_lists(c.only, "python") && !config::only_lists(c.only, "python3,") &&
        !config::only_lists(c.only, "") && !config::only_lists(c.only, "cc1"));
  CHECK_EQ(parse_with({{"PROFILE_DIR", "d"}, {"PROFILE_LOG", ""}, {"PROFILE_ONLY", ""}}, &c), std::string());
  CHECK(c.log.empty() && c.only.empty());
  const char* bad[][2] = {{"PROFILE_ONLY", ","},   {"PROFILE_ONLY", "a,"},     {"PROFILE_ONLY", ",a"},
                          {"PROFILE_ONLY", "a,,b"}, {"PROFILE_ONLY", "/bin/a"}, {"PROFILE_ONLY", "a b"},
                          {"PROFILE_ONLY", "a\tb"}, {"PROFILE_LOG", "dir/"},    {"PROFILE_LOG", ".."}};
  for (auto& b : bad) {
    std::string err = parse_with({{"PROFILE_DIR", "d"}, {b[0], b[1]}}, &c);
    CHECK(err.find(std::string(b[0]) + "='" + b[1] + "' is malformed") == 0);
  }
}

TEST(the_table_is_the_one_place) {
  int n = 0;
  const config::Var* v = config::vars(&n);
  CHECK(n >= 13);
  for (int i = 0; i < n; ++i) {
    config::Config c;
    if (v[i].def[0] != '(') CHECK(v[i].set(v[i].def, &c));
    // A malformed value's error is the row's own words for what it accepts.
    std::string err = parse_with({{"PROFILE_DIR", "d"}, {v[i].name, "\x01"}}, &c);
    bool takes_anything = std::string(v[i].name) == "PROFILE_DIR" || std::string(v[i].name) == "PROFILE_NAME" ||
                          std::string(v[i].name) == "PROFILE_LOG";
    CHECK(takes_anything ? err.empty() : err.find(v[i].want) != std::string::npos);
  }
  // An inert image's Config holds the defaults too.
  config::Config c;
  CHECK_EQ(parse_with({}, &c), std::string());
  CHECK_EQ(c.cpu_hz, 100u);
  CHECK_EQ(c.name, std::string("run"));
}
