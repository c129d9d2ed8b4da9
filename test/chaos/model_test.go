package main

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

func check(t *testing.T, ops []op) porcupine.CheckResult {
	t.Helper()
	return porcupine.CheckOperationsTimeout(kvModel, toPorcupine(ops), 0)
}

func TestModelAcceptsLinearizable(t *testing.T) {
	ops := []op{
		{Kind: "put", Key: "k", Value: "a", Call: 0, Return: 10, OK: true},
		{Kind: "get", Key: "k", Call: 5, Return: 15, OK: true, Got: "a"},
		{Kind: "cas", Key: "k", Expect: "a", Value: "b", Call: 20, Return: 30, OK: true},
		{Kind: "cas", Key: "k", Expect: "a", Value: "c", Call: 31, Return: 40, Got: "b"},
		{Kind: "get", Key: "k", Call: 41, Return: 50, OK: true, Got: "b"},
	}
	if res := check(t, ops); res != porcupine.Ok {
		t.Fatalf("linearizable history judged %s", res)
	}
}

func TestModelRejectsStaleRead(t *testing.T) {
	ops := []op{
		{Kind: "put", Key: "k", Value: "a", Call: 0, Return: 10, OK: true},
		{Kind: "put", Key: "k", Value: "b", Call: 20, Return: 30, OK: true},
		{Kind: "get", Key: "k", Call: 40, Return: 50, OK: true, Got: "a"},
	}
	if res := check(t, ops); res != porcupine.Illegal {
		t.Fatalf("stale read judged %s", res)
	}
}

func TestModelRejectsLostCAS(t *testing.T) {
	// A cas acknowledged as succeeded, then a read of the value before it.
	ops := []op{
		{Kind: "put", Key: "k", Value: "a", Call: 0, Return: 10, OK: true},
		{Kind: "cas", Key: "k", Expect: "a", Value: "b", Call: 20, Return: 30, OK: true},
		{Kind: "get", Key: "k", Call: 40, Return: 50, OK: true, Got: "a"},
	}
	if res := check(t, ops); res != porcupine.Illegal {
		t.Fatalf("lost cas judged %s", res)
	}
}

func TestModelUnknownWrites(t *testing.T) {
	// A put that timed out but happened may take effect any time after
	// its call, even after later operations; one that never happened is
	// left out.
	ops := []op{
		{Kind: "put", Key: "k", Value: "a", Call: 0, Return: 10, OK: true},
		{Kind: "put", Key: "k", Value: "x", Call: 11, Return: 100, Unknown: true, Resolved: "happened"},
		{Kind: "get", Key: "k", Call: 200, Return: 210, OK: true, Got: "a"},
		{Kind: "get", Key: "k", Call: 300, Return: 310, OK: true, Got: "x"},
		{Kind: "put", Key: "k", Value: "y", Call: 12, Return: 100, Unknown: true, Resolved: "never"},
	}
	if res := check(t, ops); res != porcupine.Ok {
		t.Fatalf("history with unknown writes judged %s", res)
	}
	// But a value read before the put's call is impossible.
	ops = append(ops, op{Kind: "get", Key: "k", Call: 1, Return: 5, OK: true, Got: "x"})
	if res := check(t, ops); res != porcupine.Illegal {
		t.Fatalf("read from the future judged %s", res)
	}
}

func TestLostWrites(t *testing.T) {
	ops := []op{
		{Kind: "put", Key: "k", Value: "a", OK: true, Rev: 5},
		{Kind: "cas", Key: "k", Value: "b", Expect: "a", OK: true, Rev: 6},
		{Kind: "put", Key: "k", Value: "c", Unknown: true},
	}
	if lost := lostWrites(ops, []etcdWrite{{"k", "a", 5}, {"k", "b", 6}}); len(lost) != 0 {
		t.Fatalf("lost = %v, want none", lost)
	}
	if lost := lostWrites(ops, []etcdWrite{{"k", "a", 5}}); len(lost) != 1 {
		t.Fatalf("lost = %v, want the cas", lost)
	}
}
