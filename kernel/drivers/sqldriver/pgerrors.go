package sqldriver

// pgErrorName is an error's ename: the condition name of its SQLSTATE
// (PostgreSQL's Appendix A) for the common ones, else its class's name,
// else "SQLSTATE code".
func pgErrorName(code string) string {
	if name, ok := pgConditions[code]; ok {
		return name
	}
	if len(code) == 5 {
		if name, ok := pgClasses[code[:2]]; ok {
			return name
		}
	}
	return "SQLSTATE " + code
}

var pgConditions = map[string]string{
	"0A000": "feature_not_supported",
	"21000": "cardinality_violation",
	"22001": "string_data_right_truncation",
	"22003": "numeric_value_out_of_range",
	"22007": "invalid_datetime_format",
	"22008": "datetime_field_overflow",
	"22012": "division_by_zero",
	"22023": "invalid_parameter_value",
	"22P02": "invalid_text_representation",
	"23502": "not_null_violation",
	"23503": "foreign_key_violation",
	"23505": "unique_violation",
	"23514": "check_violation",
	"25001": "active_sql_transaction",
	"25P01": "no_active_sql_transaction",
	"25P02": "in_failed_sql_transaction",
	"2BP01": "dependent_objects_still_exist",
	"40001": "serialization_failure",
	"40P01": "deadlock_detected",
	"42501": "insufficient_privilege",
	"42601": "syntax_error",
	"42602": "invalid_name",
	"42701": "duplicate_column",
	"42702": "ambiguous_column",
	"42703": "undefined_column",
	"42704": "undefined_object",
	"42710": "duplicate_object",
	"42723": "duplicate_function",
	"42803": "grouping_error",
	"42804": "datatype_mismatch",
	"42809": "wrong_object_type",
	"42830": "invalid_foreign_key",
	"42883": "undefined_function",
	"42P01": "undefined_table",
	"42P02": "undefined_parameter",
	"42P06": "duplicate_schema",
	"42P07": "duplicate_table",
	"42P13": "invalid_function_definition",
	"53100": "disk_full",
	"53200": "out_of_memory",
	"54001": "statement_too_complex",
	"55P03": "lock_not_available",
	"57014": "query_canceled",
	"57P01": "admin_shutdown",
	"P0001": "raise_exception",
}

var pgClasses = map[string]string{
	"01": "warning", "02": "no_data", "03": "sql_statement_not_yet_complete", "08": "connection_exception",
	"09": "triggered_action_exception", "0A": "feature_not_supported", "0B": "invalid_transaction_initiation",
	"0F": "locator_exception", "0L": "invalid_grantor", "0P": "invalid_role_specification",
	"0Z": "diagnostics_exception", "20": "case_not_found", "21": "cardinality_violation", "22": "data_exception",
	"23": "integrity_constraint_violation", "24": "invalid_cursor_state", "25": "invalid_transaction_state",
	"26": "invalid_sql_statement_name", "27": "triggered_data_change_violation",
	"28": "invalid_authorization_specification", "2B": "dependent_privilege_descriptors_still_exist",
	"2D": "invalid_transaction_termination", "2F": "sql_routine_exception", "34": "invalid_cursor_name",
	"38": "external_routine_exception", "39": "external_routine_invocation_exception",
	"3B": "savepoint_exception", "3D": "invalid_catalog_name", "3F": "invalid_schema_name",
	"40": "transaction_rollback", "42": "syntax_error_or_access_rule_violation", "44": "with_check_option_violation",
	"53": "insufficient_resources", "54": "program_limit_exceeded", "55": "object_not_in_prerequisite_state",
	"57": "operator_intervention", "58": "system_error", "72": "snapshot_too_old", "F0": "config_file_error",
	"HV": "fdw_error", "P0": "plpgsql_error", "XX": "internal_error",
}
