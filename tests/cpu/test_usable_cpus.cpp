// The default worker count (cpu::usable_cpus): the parsers of the cgroup files on text, the
// quota lookup on a directory tree made here (v2 and v1 layouts, a limit on an ancestor, the
// tightest of several), and the affinity bound in a child process pinned to one CPU.
#include <gtest/gtest.h>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cpu/usable_cpus.hpp"
#include "ladder/cpu/cpu_backend.hpp"
#include "ladder/heuristics.hpp"

namespace ladder {
namespace {

namespace fs = std::filesystem;
using cpu::detail::cgroup_cpu_quota;
using cpu::detail::parse_cfs_quota;
using cpu::detail::parse_cpu_max;
using cpu::detail::parse_proc_cgroup;

TEST(UsableCpus, ParsesCgroupV2CpuMax) {
  EXPECT_EQ(parse_cpu_max("200000 100000\n"), 2.0);
  EXPECT_EQ(parse_cpu_max("150000 100000"), 1.5);
  EXPECT_EQ(parse_cpu_max("max 100000\n"), std::nullopt);
  for (const char* bad : {"", "max", "100000", "-1 100000", "0 100000", "200000 0", "2e5 100000", "200000 100000 7"})
    EXPECT_EQ(parse_cpu_max(bad), std::nullopt) << "'" << bad << "'";
}

TEST(UsableCpus, ParsesCgroupV1Quota) {
  EXPECT_EQ(parse_cfs_quota("400000\n", "100000\n"), 4.0);
  EXPECT_EQ(parse_cfs_quota("-1\n", "100000\n"), std::nullopt);
  EXPECT_EQ(parse_cfs_quota("50000", "100000"), 0.5);
  EXPECT_EQ(parse_cfs_quota("x", "100000"), std::nullopt);
  EXPECT_EQ(parse_cfs_quota("50000", ""), std::nullopt);
}

TEST(UsableCpus, FindsTheProcessCgroupPaths) {
  const auto hybrid = parse_proc_cgroup("9:name=systemd:/\n4:memory:/m\n2:cpu,cpuacct:/pod/c1\n0::/pod/c1\n");
  EXPECT_EQ(hybrid.v2, "/pod/c1");
  EXPECT_EQ(hybrid.v1_cpu, "/pod/c1");
  const auto v1_split = parse_proc_cgroup("2:cpuacct:/a\n1:cpu:/b\n");
  EXPECT_EQ(v1_split.v1_cpu, "/b");  // cpuacct alone is not the cpu controller
  EXPECT_EQ(v1_split.v2, "");
  const auto v2 = parse_proc_cgroup("0::/\n");
  EXPECT_EQ(v2.v2, "/");
  EXPECT_EQ(parse_proc_cgroup("garbage\n\n").v2, "");
}

class CgroupTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / fs::path("ladder-cgroup-" + std::to_string(getpid()) + "-" +
                                                ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) {
    const fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string root() const { return root_.string(); }
  fs::path root_;
};

TEST_F(CgroupTree, V2QuotaOnTheCgroupOrAnAncestorTheTightestWins) {
  cpu::detail::CgroupPaths paths;
  paths.v2 = "/kube/pod/c1";
  EXPECT_EQ(cgroup_cpu_quota(root(), paths), std::nullopt);  // no files: no limit
  write("kube/pod/c1/cpu.max", "max 100000\n");
  EXPECT_EQ(cgroup_cpu_quota(root(), paths), std::nullopt);
  write("kube/pod/cpu.max", "300000 100000\n");  // the pod's limit, on an ancestor
  EXPECT_EQ(cgroup_cpu_quota(root(), paths), 3.0);
  write("cpu.max", "800000 100000\n");  // looser, at the root
  EXPECT_EQ(cgroup_cpu_quota(root(), paths), 3.0);
  write("kube/pod/c1/cpu.max", "150000 100000\n");  // tighter, on the process's own cgroup
  EXPECT_EQ(cgroup_cpu_quota(root(), paths), 1.5);
}

TEST_F(CgroupTree, V2UnderUnifiedAndV1UnderCpu) {
  cpu::detail::CgroupPaths paths;
  paths.v2 = "/s";
  write("unified/s/cpu.max", "500000 100000\n");  // a hybrid host's v2 mount
  EXPECT_EQ(cgroup_cpu_quota(root(), paths), 5.0);
  paths.v1_cpu = "/docker/x";
  write("cpu,cpuacct/docker/x/cpu.cfs_quota_us", "200000\n");
  write("cpu,cpuacct/docker/x/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(cgroup_cpu_quota(root(), paths), 2.0);
  write("cpu/docker/cpu.cfs_quota_us", "-1\n");  // no limit on the other mount name
  write("cpu/docker/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(cgroup_cpu_quota(root(), paths), 2.0);
}

TEST(UsableCpus, NeverMoreThanTheOnlineCpusAndAtLeastOne) {
  const cpu::UsableCpus u = cpu::usable_cpus();
  EXPECT_GE(u.count, 1);
  EXPECT_LE(u.count, kMaxCpuThreads);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online > 0) {
    EXPECT_LE(u.count, online);
  }
  EXPECT_FALSE(u.limited_by.empty());
}

// A child pinned to one CPU sees one usable CPU (the child only reads files and its mask: this
// process has other threads, so the child starts none and touches no pool).
TEST(UsableCpus, AProcessPinnedToOneCpuGetsOneWorker) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  ASSERT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c)
    if (CPU_ISSET(c, &mine)) first = c;
  ASSERT_GE(first, 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) _exit(10);
    const cpu::UsableCpus u = cpu::usable_cpus();
    if (u.count != 1) _exit(11);
    if (u.limited_by != "the process's CPU affinity" && u.limited_by != "the cgroup's CPU quota" &&
        u.limited_by != "online CPUs")
      _exit(12);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: cannot pin, 11: count, 12: reason";
}

}  // namespace
}  // namespace ladder
