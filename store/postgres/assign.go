package postgres

import (
	"database/sql"
	"fmt"
	"reflect"
)

// assign stores v, a value pgx decoded, in dest, as database/sql's Scan
// would for the types this store's queries read: a sql.Scanner takes it
// as is; otherwise a NULL needs a nillable destination, and a value is
// set when its type converts to the destination's.
func assign(dest, v any) error {
	if s, ok := dest.(sql.Scanner); ok {
		return s.Scan(v)
	}
	dv := reflect.ValueOf(dest)
	if dv.Kind() != reflect.Pointer || dv.IsNil() {
		return fmt.Errorf("destination %T is not a non-nil pointer", dest)
	}
	target := dv.Elem()
	if v == nil {
		switch target.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
			target.SetZero()
			return nil
		}
		return fmt.Errorf("NULL into %s", target.Type())
	}
	sv := reflect.ValueOf(v)
	switch {
	case sv.Type().AssignableTo(target.Type()):
		target.Set(sv)
	case target.Kind() == reflect.Interface:
		target.Set(sv)
	case isNumber(sv.Kind()) && isNumber(target.Kind()):
		target.Set(sv.Convert(target.Type()))
	case sv.Kind() == reflect.String && target.Kind() == reflect.Slice && target.Type().Elem().Kind() == reflect.Uint8:
		target.SetBytes([]byte(sv.String()))
	case sv.Kind() == reflect.Slice && sv.Type().Elem().Kind() == reflect.Uint8 && target.Kind() == reflect.String:
		target.SetString(string(sv.Bytes()))
	case sv.Type().ConvertibleTo(target.Type()) && sv.Kind() == target.Kind():
		target.Set(sv.Convert(target.Type()))
	default:
		return fmt.Errorf("cannot store %T in %s", v, target.Type())
	}
	return nil
}

func isNumber(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}
