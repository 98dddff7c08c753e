package daemon

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"maps"
	"strconv"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
)

// klogDebugVerbosity is klog's verbosity at --log-level debug: client-go's
// V(1) and V(2) lines (reflector restarts, leader-election changes) without
// its per-request ones.
const klogDebugVerbosity = 2

// setupLogging sets logrus's level and format, and sends what client-go
// (through klog) and the standard library log through logrus, so that
// every line follows --log-format and --log-level.
func setupLogging(level, format string) error {
	l, err := logrus.ParseLevel(level)
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logrus.SetLevel(l)
	switch format {
	case "text":
		logrus.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	case "json":
		logrus.SetFormatter(&logrus.JSONFormatter{})
	default:
		return fmt.Errorf("--log-format %q: want text or json", format)
	}
	verbosity := 0
	if l >= logrus.DebugLevel {
		verbosity = klogDebugVerbosity
	}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	if err := fs.Set("v", strconv.Itoa(verbosity)); err != nil {
		return fmt.Errorf("klog verbosity: %w", err)
	}
	klog.SetLogger(logr.New(logrusSink{}))
	log.SetFlags(0)
	log.SetOutput(logrus.StandardLogger().WriterLevel(logrus.WarnLevel))
	return nil
}

// logrusSink is a logr.LogSink that writes through logrus's standard
// logger. klog has checked its verbosity before it calls Info; V(0) is
// logrus's info level, and every higher V its debug level.
type logrusSink struct {
	fields logrus.Fields
}

func (logrusSink) Init(logr.RuntimeInfo) {}

func (logrusSink) Enabled(level int) bool { return logrus.IsLevelEnabled(logrusLevel(level)) }

func (s logrusSink) Info(level int, msg string, keysAndValues ...any) {
	logrus.WithFields(s.with(keysAndValues)).Log(logrusLevel(level), msg)
}

func (s logrusSink) Error(err error, msg string, keysAndValues ...any) {
	logrus.WithFields(s.with(keysAndValues)).WithError(err).Error(msg)
}

func (s logrusSink) WithValues(keysAndValues ...any) logr.LogSink {
	return logrusSink{fields: s.with(keysAndValues)}
}

func (s logrusSink) WithName(name string) logr.LogSink {
	if prefix, ok := s.fields["logger"].(string); ok {
		name = prefix + "/" + name
	}
	return logrusSink{fields: s.with([]any{"logger", name})}
}

// with returns the sink's fields and keysAndValues, which are pairs.
func (s logrusSink) with(keysAndValues []any) logrus.Fields {
	out := make(logrus.Fields, len(s.fields)+len(keysAndValues)/2)
	maps.Copy(out, s.fields)
	for i := 0; i < len(keysAndValues); i += 2 {
		var v any = "(MISSING)"
		if i+1 < len(keysAndValues) {
			v = fieldValue(keysAndValues[i+1])
		}
		out[fmt.Sprint(keysAndValues[i])] = v
	}
	return out
}

// fieldValue is v as logrus's JSON formatter can write it: a value it
// cannot marshal would make it print a line of plain text instead.
func fieldValue(v any) any {
	switch v := v.(type) {
	case error:
		return v // the formatter writes its Error()
	case fmt.Stringer:
		return fmt.Sprint(v) // fmt survives a String method that panics
	}
	if _, err := json.Marshal(v); err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return v
}

func logrusLevel(v int) logrus.Level {
	if v > 0 {
		return logrus.DebugLevel
	}
	return logrus.InfoLevel
}
