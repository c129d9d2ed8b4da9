package etcdproc

import (
	"encoding/json"
	"sort"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// passThrough re-emits one of etcd's log lines through the agent's logger
// so that the host has one structured stream. etcd logs zap JSON; its
// level, msg and fields are kept. Other lines (a panic's stack) are passed
// as they are. Lines below min are dropped.
func passThrough(lg *zap.Logger, line string, min zapcore.Level) {
	if quickLevel(line) < min {
		return // dropped without parsing: etcd runs at info for the publish watch
	}
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

// quickLevel is the level of one of etcd's zap JSON lines, read from its
// first field without parsing the line; zapcore.FatalLevel (never
// dropped) when it is not there.
func quickLevel(line string) zapcore.Level {
	const prefix = `{"level":"`
	if !strings.HasPrefix(line, prefix) {
		return zapcore.FatalLevel
	}
	rest := line[len(prefix):]
	end := strings.IndexByte(rest, '"')
	var l zapcore.Level
	if end < 0 || l.UnmarshalText([]byte(rest[:end])) != nil {
		return zapcore.FatalLevel
	}
	return l
}
