package main

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// The linearizability model: each key is a register holding a string ("" =
// absent), with get, put, and compare-and-swap (an etcd Txn comparing the
// value). Keys are independent, so the checker partitions the history by
// key.
type kvInput struct {
	Kind   string
	Key    string
	Value  string
	Expect string
}

type kvOutput struct {
	OK  bool
	Got string
	// Unknown: the call's outcome was never seen; it is in the history
	// only because etcd's own history shows it happened.
	Unknown bool
}

var kvModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, o := range history {
			k := o.Input.(kvInput).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], o)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() interface{} { return "" },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		s := state.(string)
		in, out := input.(kvInput), output.(kvOutput)
		switch in.Kind {
		case "get":
			return out.Got == s, s
		case "put":
			return true, in.Value
		case "cas":
			// etcd's compare on the value of a missing key is false.
			match := s != "" && s == in.Expect
			if out.Unknown || out.OK {
				return match, in.Value
			}
			return !match && out.Got == s, s
		}
		return false, s
	},
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(kvInput), output.(kvOutput)
		switch in.Kind {
		case "get":
			return fmt.Sprintf("get(%s) → %q", in.Key, out.Got)
		case "put":
			if out.Unknown {
				return fmt.Sprintf("put(%s, %q) → ?", in.Key, in.Value)
			}
			return fmt.Sprintf("put(%s, %q)", in.Key, in.Value)
		default:
			if out.Unknown {
				return fmt.Sprintf("cas(%s, %q→%q) → ? (happened)", in.Key, in.Expect, in.Value)
			}
			if out.OK {
				return fmt.Sprintf("cas(%s, %q→%q) → ok", in.Key, in.Expect, in.Value)
			}
			return fmt.Sprintf("cas(%s, %q→%q) → failed, found %q", in.Key, in.Expect, in.Value, out.Got)
		}
	},
	DescribeState: func(state interface{}) string { return fmt.Sprintf("%q", state) },
}

// toPorcupine turns the history into the checker's operations: failed
// reads carry no information and are left out, as are writes whose
// outcome is unknown, or that were refused with NOSPACE, and that etcd's
// history shows never happened. An unknown write that happened may have
// taken effect any time after its call; a refused one that happened did
// before its answer (etcd answers after applying).
func toPorcupine(ops []op) []porcupine.Operation {
	var out []porcupine.Operation
	for _, o := range ops {
		if (o.Unknown || o.Refused) && (o.Kind == "get" || o.Resolved != "happened") {
			continue
		}
		if !o.Unknown && !o.Refused && o.Kind != "cas" && !o.OK {
			continue
		}
		ret := o.Return
		if o.Unknown {
			ret = infinity
		}
		out = append(out, porcupine.Operation{ClientId: o.Client,
			Input:  kvInput{Kind: o.Kind, Key: o.Key, Value: o.Value, Expect: o.Expect},
			Output: kvOutput{OK: o.OK || o.Refused, Got: o.Got, Unknown: o.Unknown},
			Call:   o.Call, Return: ret})
	}
	return out
}
