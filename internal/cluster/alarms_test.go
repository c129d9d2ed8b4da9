package cluster

import (
	"reflect"
	"testing"

	"github.com/etcdkeeper/etcdkeeper/internal/model"
)

func TestParseAlarms(t *testing.T) {
	got := ParseAlarms([]string{"memberID:12 alarm:NOSPACE ", "memberID:123 alarm:CORRUPT ", "raft: something else"})
	want := []model.Alarm{{MemberID: 12, Type: "NOSPACE"}, {MemberID: 123, Type: "CORRUPT"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseAlarms = %+v, want %+v", got, want)
	}
}
