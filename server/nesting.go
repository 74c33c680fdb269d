package server

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
	"svc/server/apierr"
)

// maxNesting bounds how deeply JSON values in a request (message data,
// filters, any google.protobuf.Struct or ListValue) may nest: 64 levels of
// objects and arrays is far beyond any real payload and far below what the
// decoders refuse on their own (10,000 message levels), so a deep value is
// a 400, never a failure further in.
const maxNesting = 64

// errTooDeep answers a request whose JSON values nest too deeply.
var errTooDeep = apierr.Invalid("request", "JSON values nest more than %d levels deep", maxNesting)

// checkNesting refuses a request whose JSON values (Struct and ListValue
// fields) nest more than maxNesting levels; other messages do not count.
func checkNesting(m proto.Message) error {
	if m == nil {
		return nil
	}
	if !withinNesting(m.ProtoReflect(), 0) {
		return errTooDeep
	}
	return nil
}

var (
	structName = (&structpb.Struct{}).ProtoReflect().Descriptor().FullName()
	listName   = (&structpb.ListValue{}).ProtoReflect().Descriptor().FullName()
)

// withinNesting walks m, which sits depth JSON levels deep, and reports
// whether nothing in it goes past maxNesting.
func withinNesting(m protoreflect.Message, depth int) bool {
	if n := m.Descriptor().FullName(); n == structName || n == listName {
		depth++
		if depth > maxNesting {
			return false
		}
	}
	ok := true
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					ok = withinNesting(mv.Message(), depth)
					return ok
				})
			}
		case fd.IsList():
			if fd.Message() != nil {
				l := v.List()
				for i := 0; i < l.Len() && ok; i++ {
					ok = withinNesting(l.Get(i).Message(), depth)
				}
			}
		case fd.Message() != nil:
			ok = withinNesting(v.Message(), depth)
		}
		return ok
	})
	return ok
}
