// cpu::usable_cpus: the default worker count. std::thread::hardware_concurrency counts the
// machine's online CPUs, so a process pinned to 2 of 16 (taskset, numactl, a container's cpuset)
// or given 2 CPUs' worth of time (a container's --cpus, a Kubernetes limit: a cgroup quota)
// started 16 workers for 2 CPUs: oversubscribed, a layer ran 35 % slower at 8 workers on the
// 2-vCPU build machine than at 2 (docs/perf.md, 2026-12-05), and a quota also throttles.
#include "cpu/usable_cpus.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

#include "ladder/cpu/cpu_backend.hpp"
#include "ladder/heuristics.hpp"

namespace ladder::cpu {
namespace detail {
namespace {

std::optional<long long> positive_integer(std::string_view s) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || v <= 0) return std::nullopt;
  return v;
}

std::string_view trim(std::string_view s) {
  const auto blank = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// `path` and each of its ancestors, deepest first, ending with "" (the root).
std::vector<std::string> self_and_ancestors(std::string path) {
  std::vector<std::string> out;
  while (!path.empty() && path.back() == '/') path.pop_back();
  for (;;) {
    out.push_back(path);
    if (path.empty()) return out;
    const std::size_t slash = path.rfind('/');
    path = slash == std::string::npos ? std::string() : path.substr(0, slash);
  }
}

void keep_lower(std::optional<double>& best, std::optional<double> q) {
  if (q && (!best || *q < *best)) best = q;
}

}  // namespace

std::optional<double> parse_cpu_max(std::string_view text) {
  text = trim(text);
  const std::size_t space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string_view quota = text.substr(0, space), period = trim(text.substr(space + 1));
  const std::optional<long long> p = positive_integer(period);
  if (!p || quota == "max") return std::nullopt;
  const std::optional<long long> q = positive_integer(quota);
  if (!q) return std::nullopt;
  return static_cast<double>(*q) / static_cast<double>(*p);
}

std::optional<double> parse_cfs_quota(std::string_view quota, std::string_view period) {
  const std::optional<long long> q = positive_integer(trim(quota)), p = positive_integer(trim(period));
  if (!q || !p) return std::nullopt;  // -1: no limit
  return static_cast<double>(*q) / static_cast<double>(*p);
}

CgroupPaths parse_proc_cgroup(std::string_view text) {
  CgroupPaths out;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    // hierarchy-id:controllers:path
    const std::size_t a = line.find(':');
    const std::size_t b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    const std::string_view id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1);
    const std::string path(trim(line.substr(b + 1)));
    if (id == "0" && controllers.empty()) {
      out.v2 = path;
      continue;
    }
    std::string_view rest = controllers;
    while (!rest.empty()) {
      const std::size_t comma = rest.find(',');
      if (rest.substr(0, comma) == "cpu") out.v1_cpu = path;
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  }
  return out;
}

std::optional<double> cgroup_cpu_quota(const std::string& cgroup_root, const CgroupPaths& paths) {
  std::optional<double> best;
  if (!paths.v2.empty())
    for (const char* mount : {"", "/unified"})
      for (const std::string& dir : self_and_ancestors(paths.v2))
        if (const std::optional<std::string> text = read_file(cgroup_root + mount + dir + "/cpu.max"))
          keep_lower(best, parse_cpu_max(*text));
  if (!paths.v1_cpu.empty())
    for (const char* mount : {"/cpu", "/cpu,cpuacct"})
      for (const std::string& dir : self_and_ancestors(paths.v1_cpu)) {
        const std::string base = cgroup_root + mount + dir;
        const std::optional<std::string> quota = read_file(base + "/cpu.cfs_quota_us");
        const std::optional<std::string> period = read_file(base + "/cpu.cfs_period_us");
        if (quota && period) keep_lower(best, parse_cfs_quota(*quota, *period));
      }
  return best;
}

}  // namespace detail

UsableCpus usable_cpus() {
  UsableCpus u;
  const unsigned online = std::thread::hardware_concurrency();
  u.count = online > 0 ? static_cast<int>(online) : 1;
  u.limited_by = "online CPUs";
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int allowed = CPU_COUNT(&set);
    if (allowed > 0 && allowed < u.count) {
      u.count = allowed;
      u.limited_by = "the process's CPU affinity";
    }
  }
  const std::optional<std::string> cgroups = detail::read_file("/proc/self/cgroup");
  if (cgroups) {
    const std::optional<double> quota = detail::cgroup_cpu_quota("/sys/fs/cgroup", detail::parse_proc_cgroup(*cgroups));
    // A quota of 1.5 CPUs keeps two workers busy part of the time: rounded up, at least 1.
    if (quota) {
      const int cpus = std::max(1, static_cast<int>(std::ceil(*quota - 1e-9)));
      if (cpus < u.count) {
        u.count = cpus;
        u.limited_by = "the cgroup's CPU quota";
      }
    }
  }
#endif
  u.count = std::min(u.count, kMaxCpuThreads);
  return u;
}

}  // namespace ladder::cpu
