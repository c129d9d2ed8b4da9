package spec

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// parseURL accepts exactly what etcd accepts in its URL flags:
// http(s)://host:port and nothing after it.
func parseURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("empty: write it as http://host:port")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("not a URL: write it as http://host:port")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("scheme must be http or https, e.g. http://10.0.0.1:2380")
	case u.Opaque != "" || u.Hostname() == "":
		return nil, errors.New("missing host: write it as http://host:port")
	case u.Port() == "":
		return nil, errors.New("missing port: etcd needs an explicit port, e.g. :2380 for peers, :2379 for clients")
	case u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil || u.ForceQuery:
		return nil, errors.New("must not have a path, query, fragment or user: etcd takes scheme://host:port only")
	}
	if err := checkPort(u.Port()); err != nil {
		return nil, err
	}
	return u, nil
}

func checkPort(port string) error {
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q must be a number from 1 to 65535", port)
	}
	return nil
}

// checkAddr checks an agent address: host:port, the host may be empty
// (all interfaces) or a name.
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("must be host:port, e.g. 127.0.0.1:2378: %w", err)
	}
	return checkPort(port)
}

// sameURL is the form two URLs are compared in: scheme and host are case
// insensitive.
func sameURL(u *url.URL) string {
	return u.Scheme + "://" + strings.ToLower(u.Host)
}

// listenURL is a URL etcd binds, with the index of the advertised URL it
// was derived from.
type listenURL struct {
	url    string
	origin int
}

// deriveListen turns advertised URLs into the URLs etcd listens on. etcd
// binds IPs only: an IP listens on itself, localhost on 127.0.0.1 and any
// other name on 0.0.0.0 (the host's address for that name is not known
// here). A wildcard on a port covers that port's specific IPs, and binding
// both would fail with "address already in use".
func deriveListen(advertised []string) []listenURL {
	var out []listenURL
	wild := map[string]bool{}
	for i, raw := range advertised {
		u, err := parseURL(raw)
		if err != nil {
			continue
		}
		host := listenHost(u.Hostname())
		if host == "0.0.0.0" {
			wild[u.Scheme+":"+u.Port()] = true
		}
		out = append(out, listenURL{url: u.Scheme + "://" + net.JoinHostPort(host, u.Port()), origin: i})
	}
	return dedupeListen(out, wild)
}

func dedupeListen(in []listenURL, wild map[string]bool) []listenURL {
	var out []listenURL
	seen := map[string]bool{}
	for _, l := range in {
		u, _ := url.Parse(l.url)
		if seen[l.url] || u.Hostname() != "0.0.0.0" && wild[u.Scheme+":"+u.Port()] {
			continue
		}
		seen[l.url] = true
		out = append(out, l)
	}
	return out
}

func listenHost(host string) string {
	if ip := net.ParseIP(host); ip != nil {
		return ip.String()
	}
	if strings.EqualFold(host, "localhost") {
		return "127.0.0.1"
	}
	return "0.0.0.0"
}

func listenURLs(advertised []string) []string {
	var out []string
	for _, l := range deriveListen(advertised) {
		out = append(out, l.url)
	}
	return out
}

func quote(s string) string {
	const max = 80
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strconv.Quote(s)
}
