package etcdproc

import (
	"encoding/json"
	"sort"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// passThrough re-emits one of etcd's log lines through the agent's logger
// so that the host has one structured stream. etcd logs zap JSON; its
// level, msg and fields are kept. Other lines (a panic's stack) are passed
// as they are. Lines below min are dropped.
func passThrough(lg *zap.Logger, line string, min zapcore.Level) {
	var rec map[string]any
	if err := json.Unmarshal([]byte(line), &rec); err != nil || rec == nil {
		lg.Warn("etcd output", zap.String("line", line))
		return
	}
	level := zapcore.InfoLevel
	if s, ok := rec["level"].(string); ok {
		if err := level.UnmarshalText([]byte(s)); err != nil {
			level = zapcore.InfoLevel
		}
	}
	if level < min {
		return
	}
	// etcd's fatal and panic lines must not end the agent.
	if level > zapcore.ErrorLevel {
		level = zapcore.ErrorLevel
	}
	msg, _ := rec["msg"].(string)
	ce := lg.Check(level, msg)
	if ce == nil {
		return
	}
	keys := make([]string, 0, len(rec))
	for k := range rec {
		switch k {
		case "level", "msg", "ts", "caller", "logger":
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fields := make([]zap.Field, 0, len(keys))
	for _, k := range keys {
		fields = append(fields, zap.Any(k, rec[k]))
	}
	ce.Write(fields...)
}
