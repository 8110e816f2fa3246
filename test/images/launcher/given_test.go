package launcher

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestWaitingLauncherTakesOnlyItsInstance(t *testing.T) {
	given := make(chan *kubevirtv1.VirtualMachineInstance, 1)
	h := waitingHandler("uid-1", given)
	put := func(uid string) int {
		b, err := json.Marshal(&kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", UID: types.UID(uid)}})
		require.NoError(t, err)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPut, InstancePath, strings.NewReader(string(b))))
		return rec.Code
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, StatusPath, nil))
	var st Status
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &st))
	assert.Equal(t, StateWaiting, st.QEMU.State)

	assert.Equal(t, http.StatusConflict, put("uid-2"), "another instance's launcher")
	assert.Empty(t, given)
	assert.Equal(t, http.StatusAccepted, put("uid-1"))
	assert.Equal(t, http.StatusAccepted, put("uid-1"), "given again while it starts")
	require.Len(t, given, 1)
	assert.Equal(t, "vm", (<-given).Name)

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPut, InstancePath, strings.NewReader("{")))
	assert.Equal(t, http.StatusBadRequest, rec.Code)
}
