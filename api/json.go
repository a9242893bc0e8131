package api

import (
	"encoding/json"
	"net/http"
)

// apiError is the body of every answer that is not a command's result:
// a short machine code and a sentence for people.
type apiError struct {
	Error  string `json:"error"`
	Detail string `json:"detail,omitempty"`
}

// writeError answers status with an apiError: {"error":code}, and
// "detail" when detail is not empty.
func writeError(w http.ResponseWriter, status int, code, detail string) {
	writeJSON(w, status, apiError{Error: code, Detail: detail})
}

// writeJSON answers status with v as JSON (Content-Type
// application/json), followed by a newline.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
