// Package leafdv1 is the Go code generated from leafd.proto, leafd's gRPC
// API (docs/grpc.md): the messages and the IDService client and server.
//
// Regenerate it after a change to leafd.proto, from this directory, with
// protoc and the two plugins at the versions named in the generated files'
// headers (.ci/run installs them):
//
//	go generate ./proto/...
//
// TestGeneratedCodeIsCurrent fails when the committed code differs from
// what they generate.
package leafdv1

//go:generate protoc --proto_path=../.. --go_out=../.. --go_opt=paths=source_relative --go-grpc_out=../.. --go-grpc_opt=paths=source_relative leafd/v1/leafd.proto
