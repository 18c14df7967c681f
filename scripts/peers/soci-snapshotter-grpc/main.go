// soci-snapshotter-grpc, the SOCI snapshotter's daemon, wired from the packages of its released
// module: the module's own main lives in a nested module that no release tag covers, so the Go
// module proxy cannot serve it. This program does what that daemon does for a benchmark or a test
// (config file, root, the snapshotter service over gRPC on a unix socket, docker config
// credentials) and nothing more: no metrics, no debug endpoint, no CRI or kubeconfig keychain.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/awslabs/soci-snapshotter/config"
	"github.com/awslabs/soci-snapshotter/fs"
	"github.com/awslabs/soci-snapshotter/metadata"
	"github.com/awslabs/soci-snapshotter/service"
	"github.com/awslabs/soci-snapshotter/service/keychain/dockerconfig"
	"github.com/awslabs/soci-snapshotter/service/resolver"
	"github.com/awslabs/soci-snapshotter/version"
	"github.com/awslabs/soci-snapshotter/ztoc"
	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	"github.com/containerd/containerd/v2/contrib/snapshotservice"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/log"
	"github.com/sirupsen/logrus"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
)

func main() {
	address := flag.String("address", "/run/soci-snapshotter-grpc/soci-snapshotter-grpc.sock", "unix socket of the snapshotter's gRPC server")
	configPath := flag.String("config", config.DefaultConfigPath, "configuration file (TOML)")
	root := flag.String("root", config.DefaultSociSnapshotterRootPath, "root directory of the snapshotter")
	level := flag.String("log-level", "info", "log level")
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Printf("soci-snapshotter-grpc %s\n", version.Version)
		return
	}
	if err := run(*address, *configPath, *root, *level); err != nil {
		fmt.Fprintf(os.Stderr, "soci-snapshotter-grpc: %v\n", err)
		os.Exit(1)
	}
}

func run(address, configPath, root, level string) error {
	lvl, err := logrus.ParseLevel(level)
	if err != nil {
		return err
	}
	logrus.SetLevel(lvl)
	ctx, cancel := context.WithCancel(log.WithLogger(context.Background(), log.L))
	defer cancel()

	cfg, err := config.NewConfigFromToml(configPath)
	if err != nil {
		return err
	}
	if !cfg.SkipCheckSnapshotterSupported {
		if err := service.Supported(root); err != nil {
			return fmt.Errorf("snapshotter not supported here: %w", err)
		}
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return err
	}
	db, err := bolt.Open(filepath.Join(root, "metadata.db"), 0o600, &bolt.Options{
		NoFreelistSync: true, FreelistType: bolt.FreelistMapType, NoSync: cfg.MetadataDBNoSync,
	})
	if err != nil {
		return err
	}
	defer db.Close()
	store := func(sr *io.SectionReader, toc ztoc.TOC, opts ...metadata.Option) (metadata.Reader, error) {
		return metadata.NewReader(db, sr, toc, opts...)
	}
	snapshotter, err := service.NewSociSnapshotterService(ctx, root, &cfg.ServiceConfig,
		service.WithCredsFuncs([]resolver.Credential{dockerconfig.NewDockerConfigKeychain(ctx)}...),
		service.WithFilesystemOptions(fs.WithMetadataStore(store)))
	if err != nil {
		return err
	}
	defer snapshotter.Close()

	// containerd's namespace arrives as incoming metadata; the snapshotter reads it from the context
	// as outgoing metadata too (when it calls back into containerd), so copy it across.
	rpc := grpc.NewServer(
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
			if ns, ok := namespaces.Namespace(ctx); ok {
				ctx = namespaces.WithNamespace(ctx, ns)
			}
			return next(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, next grpc.StreamHandler) error {
			if ns, ok := namespaces.Namespace(ss.Context()); ok {
				ss = &streamWithContext{ServerStream: ss, ctx: namespaces.WithNamespace(ss.Context(), ns)}
			}
			return next(srv, ss)
		}),
	)
	snapshotsapi.RegisterSnapshotsServer(rpc, snapshotservice.FromSnapshotter(snapshotter))

	if err := os.MkdirAll(filepath.Dir(address), 0o700); err != nil {
		return err
	}
	if err := os.Remove(address); err != nil && !os.IsNotExist(err) {
		return err
	}
	listener, err := net.Listen("unix", address)
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- rpc.Serve(listener) }()
	log.G(ctx).WithField("address", address).Info("soci-snapshotter-grpc successfully started")

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, unix.SIGINT, unix.SIGTERM)
	select {
	case <-signals:
		rpc.GracefulStop()
		return nil
	case err := <-served:
		return err
	}
}

type streamWithContext struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *streamWithContext) Context() context.Context { return s.ctx }
