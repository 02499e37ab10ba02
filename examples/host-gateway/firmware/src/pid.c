/* The fan controller: a PID loop in Q16.16, its output clamped, its integral held when the
 * output saturates (no wind-up). */
#include "gateway.h"

void pid_init(struct pid_state *pid, q16_t kp, q16_t ki, q16_t kd)
{
    pid->kp = kp;
    pid->ki = ki;
    pid->kd = kd;
    pid->integral = 0;
    pid->previous_error = 0;
    pid->out_min = q16_from_int(0);
    pid->out_max = q16_from_int(100);
}

q16_t pid_update(struct pid_state *pid, q16_t setpoint, q16_t measured)
{
    q16_t error = setpoint - measured;
    q16_t integral = pid->integral + error;
    q16_t derivative = error - pid->previous_error;
    q16_t out = q16_mul(pid->kp, error) + q16_mul(pid->ki, integral) + q16_mul(pid->kd, derivative);
    pid->previous_error = error;
    if (out > pid->out_max) {
        return pid->out_max;
    }
    if (out < pid->out_min) {
        return pid->out_min;
    }
    pid->integral = integral;
    return out;
}
