package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/etcdkeeper/etcdkeeper/internal/agent"
	"github.com/etcdkeeper/etcdkeeper/internal/httpapi"
	"github.com/etcdkeeper/etcdkeeper/internal/spec"
)

type runFlags struct {
	config    string
	name      string
	logLevel  string
	logFormat string
}

func runCmd() *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use: "run --config FILE [--name NAME]",
		Example: `  # as the packaged service does, on the host named like its member
  etcdkeeper run --config /etc/etcdkeeper/cluster.yaml

  # a member not named like its host, with readable logs
  etcdkeeper run --config /etc/etcdkeeper/cluster.yaml --name node2 --log-format console`,
		Short: "Run the agent for this host's member in the foreground",
		Long: `run starts the local etcd member described by the spec and keeps it healthy:
it supervises the process, joins the cluster, follows spec edits and repairs
corrupt data. SIGTERM or SIGINT stops etcd gracefully and exits 0; SIGHUP
re-reads the spec.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runAgent(f) },
	}
	c.Flags().StringVarP(&f.config, "config", "c", "/etc/etcdkeeper/cluster.yaml", "the spec file shared by all hosts")
	c.Flags().StringVar(&f.name, "name", "", "this host's member name in the spec (default: the member named like the host, or like its first label)")
	c.Flags().StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	c.Flags().StringVar(&f.logFormat, "log-format", "json", "json (one structured line per event) or console")
	return c
}

func runAgent(f runFlags) error {
	lg, err := newLogger(f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	defer func() { _ = lg.Sync() }()
	s, err := spec.Load(f.config)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return fmt.Errorf("cannot start: the spec %s is not valid", f.config)
	}
	for _, w := range s.Warnings {
		lg.Warn("spec warning", zap.String("warning", w.Error()))
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("locate own binary for the embedded etcd: %w", err)
	}
	a, err := agent.New(agent.Config{Spec: s, Name: memberName(s, f.name), Self: self, Logger: lg,
		CrashAt: os.Getenv("ETCDKEEPER_TEST_CRASH_AT"), Version: version})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			lg.Info("SIGHUP: re-reading the spec")
			a.RequestReload()
		}
	}()
	_, member := a.Spec()
	// Changes (POST /recovery) only through the control socket, from root
	// or the agent's user; agent.addr serves reads.
	sock := httpapi.SocketPath(member.StateDir)
	if err := httpapi.ServeControl(ctx, lg, sock, httpapi.ControlHandler(a, a.Metrics().Registry)); err != nil {
		lg.Error("control socket not served: this agent takes no recovery request from this host", zap.Error(err))
	}
	if err := httpapi.Serve(ctx, lg, member.AgentAddr, httpapi.Handler(a, a.Metrics().Registry, sock)); err != nil {
		// The endpoint is for observers; the member is kept running without it.
		lg.Error("agent endpoint not served", zap.Error(err))
	}
	if s.Agent.RecoveryAddr != "" {
		if err := serveRecovery(ctx, lg, a, s, member); err != nil {
			lg.Error("recovery endpoint not served", zap.Error(err))
		}
	}
	return a.Run(ctx)
}

// memberName is --name, or the member this host runs (spec.ForHost), or,
// on a host that runs none, the host name (which the agent then refuses,
// naming the members).
func memberName(s *spec.Spec, name string) string {
	if name != "" {
		return name
	}
	if m, ok := s.ForHost(hostname()); ok {
		return m.Name
	}
	return hostname()
}

// serveRecovery serves /recovery on agent.recoveryAddr for the other
// hosts' `recover`: over mutual TLS to the members' peer certificates, or,
// only where the spec says agent.recoveryInsecure, plain HTTP to anyone
// who reaches it.
func serveRecovery(ctx context.Context, lg *zap.Logger, a *agent.Agent, s *spec.Spec, member spec.Member) error {
	cfg, err := httpapi.RecoveryTLS(member.TLS.Peer)
	if err != nil {
		return err
	}
	members := func() []spec.Member { s, _ := a.Spec(); return s.Members }
	if cfg == nil {
		if !s.Agent.RecoveryInsecure {
			return errors.New("agent.recoveryAddr without tls.peer needs agent.recoveryInsecure: true")
		}
		members = nil
	}
	return httpapi.ServeTLS(ctx, lg, s.Agent.RecoveryAddr, httpapi.RecoveryHandler(a, members), cfg)
}

func newLogger(level, format string) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", level, err)
	}
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.Sampling = nil
	cfg.DisableStacktrace = true
	cfg.EncoderConfig.TimeKey = "ts"
	cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	cfg.OutputPaths = []string{"stderr"}
	switch format {
	case "json":
	case "console":
		cfg.Encoding = "console"
		cfg.EncoderConfig.EncodeLevel = zapcore.CapitalLevelEncoder
	default:
		return nil, fmt.Errorf("--log-format %q: use json or console", format)
	}
	lg, err := cfg.Build(zap.WithCaller(false))
	if err != nil {
		return nil, fmt.Errorf("logger: %w", err)
	}
	return lg, nil
}
