package main

import (
	"io"
	"net"
	"net/http"
	"sync/atomic"
)

// traceSink is the OTLP/HTTP collector of a -traced run: it takes every
// export (POST /v1/traces), reads it whole and answers success, as a
// collector would, keeping nothing.
type traceSink struct {
	url     string
	srv     *http.Server
	exports atomic.Int64
	done    chan struct{}
}

func startTraceSink() (*traceSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &traceSink{url: "http://" + ln.Addr().String(), done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.exports.Add(1)
		// An empty ExportTraceServiceResponse: everything was accepted.
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})
	s.srv = &http.Server{Handler: mux}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// close stops the sink and returns how many exports it received.
func (s *traceSink) close() int64 {
	_ = s.srv.Close()
	<-s.done
	return s.exports.Load()
}
