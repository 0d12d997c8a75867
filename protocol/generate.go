package protocol

// The TypeScript and Lua client types under editors/ are generated from this
// package by ./gen; generate_test.go fails when they are stale.

//go:generate go run ./gen
