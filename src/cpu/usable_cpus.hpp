// How many CPUs this process may use (cpu::usable_cpus, cpu_backend.hpp), in pieces that the
// tests can feed with text and a directory tree of their own.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ladder::cpu::detail {

// cgroup v2's cpu.max ("200000 100000": 2 CPUs' worth; "max 100000": no limit): the quota in
// CPUs, nullopt for no limit or text that is not two positive integers (or "max" and one).
std::optional<double> parse_cpu_max(std::string_view text);
// cgroup v1's cpu.cfs_quota_us and cpu.cfs_period_us ("-1" quota: no limit).
std::optional<double> parse_cfs_quota(std::string_view quota, std::string_view period);
// The process's cgroup paths from /proc/self/cgroup text: the v2 line ("0::/a/b") and the v1
// line whose controllers include "cpu" ("4:cpu,cpuacct:/a/b"); empty when absent.
struct CgroupPaths {
  std::string v2;
  std::string v1_cpu;
};
CgroupPaths parse_proc_cgroup(std::string_view text);

// The tightest CPU quota on the process's cgroup and its ancestors, under the cgroup
// filesystem mounted at `cgroup_root` (/sys/fs/cgroup: v2 at the root or at unified/, v1's cpu
// controller at cpu/ or cpu,cpuacct/): in CPUs, nullopt when none is set.
std::optional<double> cgroup_cpu_quota(const std::string& cgroup_root, const CgroupPaths& paths);

}  // namespace ladder::cpu::detail
