package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// maxBody bounds an answer Fetch or FetchProcesses reads; thousands of containers, or the
// processes an agent lists at most, take far less.
const maxBody = 16 << 20

// Fetch reads the pins view from an agent's inspection endpoint: base is the server's URL
// ("http://127.0.0.1:9720"), with or without the /pins path.
func Fetch(ctx context.Context, client *http.Client, base string) (Pins, error) {
	u, err := endpointURL(base)
	if err != nil {
		return Pins{}, err
	}
	if !strings.HasSuffix(u.Path, PathPins) {
		u.Path = strings.TrimSuffix(u.Path, "/") + PathPins
	}
	body, err := getBody(ctx, client, u, "pins")
	if err != nil {
		return Pins{}, err
	}
	return DecodePins(body, u.String())
}

// FetchProcesses reads the processes of the pinned containers of the given pods (every pinned
// container for none) from an agent's inspection endpoint; base is the server's URL, as for
// Fetch.
func FetchProcesses(ctx context.Context, client *http.Client, base string, pods []types.NamespacedName) (Processes, error) {
	u, err := endpointURL(base)
	if err != nil {
		return Processes{}, err
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), PathPins) + PathProcesses
	q := url.Values{}
	for _, p := range pods {
		q.Add(QueryPod, p.String())
	}
	u.RawQuery = q.Encode()
	body, err := getBody(ctx, client, u, "processes")
	if err != nil {
		return Processes{}, err
	}
	return DecodeProcesses(body, u.String())
}

func endpointURL(base string) (*url.URL, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q is not a URL like http://127.0.0.1:9720", base)
	}
	return u, nil
}

// getBody reads one answer of at most maxBody bytes; what names it in errors.
func getBody(ctx context.Context, client *http.Client, u *url.URL, what string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", u, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read %s from %s: %w", what, u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("read %s from %s: %w", what, u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read %s from %s: %s: %s", what, u, resp.Status, strings.TrimSpace(string(body[:min(len(body), 512)])))
	}
	if len(body) > maxBody {
		return nil, fmt.Errorf("read %s from %s: answer larger than %d bytes; is it a finegrain node agent?", what, u, maxBody)
	}
	return body, nil
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
