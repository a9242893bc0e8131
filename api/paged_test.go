package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hearthd/hearth/store"
)

// Helpers shared by the tests of the two paged endpoints, GET
// /api/v1/audit and GET /api/v1/deadletters.

// storeServer opens a store in a temp dir, fills it with fill, and serves
// the endpoints register adds over it. It returns the server and the
// store; both are closed when the test ends.
func storeServer(t *testing.T, fill func(*store.Store) error, register func(*http.ServeMux, *store.Store)) (*httptest.Server, *store.Store) {
	t.Helper()
	s, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := fill(s); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	register(mux, s)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, s
}

// getQuery GETs path?query from srv and returns the status and body,
// checking that the answer is JSON.
func getQuery(t *testing.T, srv *httptest.Server, path, query string) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path + "?" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	return resp.StatusCode, string(body)
}

// badParameter is a query and the error its 400 should say.
type badParameter struct{ query, err string }

// checkBadParameters checks that get answers each query 400 with
// {"error":"invalid_parameter","detail":err}.
func checkBadParameters(t *testing.T, get func(query string) (int, string), tests []badParameter) {
	t.Helper()
	for _, tt := range tests {
		code, body := get(tt.query)
		want, _ := json.Marshal(struct {
			Error  string `json:"error"`
			Detail string `json:"detail"`
		}{"invalid_parameter", tt.err})
		if code != http.StatusBadRequest || body != string(want)+"\n" {
			t.Errorf("?%s: status %d, body %s\nwant 400, %s", tt.query, code, body, want)
		}
	}
}

// pagesOfThree pages through get with limit=3, passing each page's
// next_after as the next after, until a page has fewer than 3 records (5
// pages at most). opIDs decodes a page's body into its records' op_ids
// and its next_after.
func pagesOfThree(t *testing.T, get func(query string) (int, string), opIDs func(body string) ([]string, uint64, error)) [][]string {
	t.Helper()
	var pages [][]string
	var after uint64
	for range 5 {
		_, body := get(fmt.Sprintf("limit=3&after=%d", after))
		ids, next, err := opIDs(body)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, ids)
		if len(ids) < 3 {
			break
		}
		after = next
	}
	return pages
}
