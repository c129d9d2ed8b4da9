package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat
// (100 on every Linux architecture Go runs on).
const clockTicks = 100

// cpuTicks is utime+stime of pid, the process itself without children
// (the agent's etcd is a child and is not counted).
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces; fields start after its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return u + st, nil
}

// rssKB is VmRSS of pid in KiB.
func rssKB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// idleUsage samples the pids for d: each one's CPU as a fraction of one
// core over d, and the largest RSS seen (KiB).
func idleUsage(pids []int, d time.Duration) (cpu []float64, maxRSS []int64, err error) {
	start := make([]int64, len(pids))
	maxRSS = make([]int64, len(pids))
	for i, pid := range pids {
		if start[i], err = cpuTicks(pid); err != nil {
			return nil, nil, err
		}
	}
	t0 := time.Now()
	for time.Since(t0) < d {
		for i, pid := range pids {
			if kb, err := rssKB(pid); err == nil && kb > maxRSS[i] {
				maxRSS[i] = kb
			}
		}
		time.Sleep(time.Second)
	}
	wall := time.Since(t0).Seconds()
	for i, pid := range pids {
		end, err := cpuTicks(pid)
		if err != nil {
			return nil, nil, err
		}
		cpu = append(cpu, float64(end-start[i])/clockTicks/wall)
	}
	return cpu, maxRSS, nil
}
