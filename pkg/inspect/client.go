package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// maxPinsBody bounds the /pins answer Fetch reads; thousands of containers take far less.
const maxPinsBody = 16 << 20

// Fetch reads the pins view from an agent's inspection endpoint: base is the server's URL
// ("http://127.0.0.1:9720"), with or without the /pins path.
func Fetch(ctx context.Context, client *http.Client, base string) (Pins, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return Pins{}, fmt.Errorf("endpoint %q is not a URL like http://127.0.0.1:9720", base)
	}
	if !strings.HasSuffix(u.Path, PathPins) {
		u.Path = strings.TrimSuffix(u.Path, "/") + PathPins
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Pins{}, fmt.Errorf("request %s: %w", u, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Pins{}, fmt.Errorf("read pins from %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPinsBody+1))
	if err != nil {
		return Pins{}, fmt.Errorf("read pins from %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Pins{}, fmt.Errorf("read pins from %s: %s: %s", u, resp.Status, strings.TrimSpace(string(body[:min(len(body), 512)])))
	}
	if len(body) > maxPinsBody {
		return Pins{}, fmt.Errorf("read pins from %s: answer larger than %d bytes; is it a finegrain node agent?", u, maxPinsBody)
	}
	return DecodePins(body, u.String())
}

// DecodePins reads the JSON form of a Pins view; from names where it came from, for errors.
func DecodePins(data []byte, from string) (Pins, error) {
	var v Pins
	if err := json.Unmarshal(data, &v); err != nil {
		return Pins{}, fmt.Errorf("pins from %s are not a finegrain pins view: %w", from, err)
	}
	if v.Source == "" {
		return Pins{}, fmt.Errorf("pins from %s have no source field; is it a finegrain node agent?", from)
	}
	return v, nil
}
