package nri

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	nrilog "github.com/containerd/nri/pkg/log"
)

// Mode is how the agent chooses its container-creation path.
type Mode string

// Modes.
const (
	// ModeAuto uses NRI when the runtime's NRI socket exists at start-up, inotify otherwise.
	ModeAuto Mode = "auto"
	// ModeOn always uses NRI, waiting for the socket (a runtime that requires the plugin).
	ModeOn Mode = "on"
	// ModeOff never uses NRI.
	ModeOff Mode = "off"
)

// ParseMode reads a --nri flag value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAuto, ModeOn, ModeOff:
		return m, nil
	}
	return "", fmt.Errorf("NRI mode %q: want auto, on or off", s)
}

// Select reports whether the agent takes the NRI path, and why, from the mode and what is at the
// socket path now.
func Select(mode Mode, socket string) (use bool, why string) {
	switch mode {
	case ModeOn:
		return true, "NRI is required (--nri=on)"
	case ModeOff:
		return false, "NRI is off (--nri=off)"
	}
	fi, err := os.Stat(socket)
	switch {
	case err != nil:
		return false, fmt.Sprintf("no NRI socket at %s (%v): the runtime has no NRI (containerd < 2.0, or NRI disabled)", socket, err)
	case fi.Mode().Type() != fs.ModeSocket:
		return false, fmt.Sprintf("%s is not a socket (%s)", socket, fi.Mode().Type())
	}
	return true, fmt.Sprintf("the runtime's NRI socket %s exists", socket)
}

// stubLogger routes the NRI stub's messages into the agent's log, as constant messages with the
// stub's text as a value; its chatter about each (re)connection stays at debug level.
type stubLogger struct{ log *slog.Logger }

var _ nrilog.Logger = stubLogger{}

func (l stubLogger) Debugf(ctx context.Context, format string, args ...any) {
	l.log.DebugContext(ctx, "NRI stub", "message", fmt.Sprintf(format, args...))
}

func (l stubLogger) Infof(ctx context.Context, format string, args ...any) {
	l.log.DebugContext(ctx, "NRI stub", "message", fmt.Sprintf(format, args...))
}

func (l stubLogger) Warnf(ctx context.Context, format string, args ...any) {
	l.log.WarnContext(ctx, "NRI stub", "message", fmt.Sprintf(format, args...))
}

func (l stubLogger) Errorf(ctx context.Context, format string, args ...any) {
	l.log.ErrorContext(ctx, "NRI stub", "message", fmt.Sprintf(format, args...))
}
